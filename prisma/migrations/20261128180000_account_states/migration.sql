-- Accounts over months: an account's status beyond `linked` (why, and since when), when an unlinked
-- account's data was purged, every token an account was linked with, and the account's events in order.
ALTER TABLE "linked_accounts" ADD COLUMN "status_reason" TEXT;
ALTER TABLE "linked_accounts" ADD COLUMN "status_changed_at" TIMESTAMPTZ(6);
ALTER TABLE "linked_accounts" ADD COLUMN "purged_at" TIMESTAMPTZ(6);

CREATE TABLE "account_tokens" (
    "account_id" UUID NOT NULL,
    "token_hash" CHAR(64) NOT NULL,
    "token_ciphertext" BYTEA NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "refused_at" TIMESTAMPTZ(6),

    CONSTRAINT "account_tokens_pkey" PRIMARY KEY ("account_id","token_hash")
);
CREATE UNIQUE INDEX "account_tokens_token_hash_key" ON "account_tokens"("token_hash");
ALTER TABLE "account_tokens" ADD CONSTRAINT "account_tokens_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "linked_accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
-- Each account's current token is its first known one.
INSERT INTO "account_tokens" ("account_id", "token_hash", "token_ciphertext", "created_at")
SELECT "id", "token_hash", "token_ciphertext", "created_at" FROM "linked_accounts";

CREATE TABLE "account_events" (
    "account_id" UUID NOT NULL,
    "id" BIGSERIAL NOT NULL,
    "event" TEXT NOT NULL,
    "reason" TEXT,
    "at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "account_events_pkey" PRIMARY KEY ("account_id","id")
);
CREATE INDEX "account_events_at_idx" ON "account_events"("at");
