-- CreateTable
CREATE TABLE "link_sessions" (
    "id" TEXT NOT NULL,
    "account_id" UUID NOT NULL,
    "secret_hash" CHAR(64) NOT NULL,
    "name" TEXT NOT NULL,
    "scopes" TEXT[],
    "expires_at" TIMESTAMPTZ(6) NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "link_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "link_sessions_secret_hash_key" ON "link_sessions"("secret_hash");

-- CreateIndex
CREATE INDEX "link_sessions_account_id_idx" ON "link_sessions"("account_id");
