-- CreateTable
CREATE TABLE "webhook_registrations" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "upstream_id" TEXT,
    "type" TEXT NOT NULL,
    "event" TEXT NOT NULL,
    "project_id" TEXT,
    "authorization_hash" CHAR(64) NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_registrations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "inbox_events" (
    "id" BIGSERIAL NOT NULL,
    "account_id" UUID NOT NULL,
    "registration_id" UUID,
    "dedupe_key" CHAR(64) NOT NULL,
    "event" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "target" TEXT NOT NULL,
    "project_id" TEXT,
    "body" JSONB NOT NULL,
    "received_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "applied_at" TIMESTAMPTZ(6),
    "outcome" TEXT,

    CONSTRAINT "inbox_events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "async_requests" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "method" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "headers" JSONB NOT NULL,
    "body" BYTEA,
    "status" INTEGER,
    "response_headers" JSONB,
    "response_body" BYTEA,
    "error" TEXT,
    "started_at" TIMESTAMPTZ(6),
    "finished_at" TIMESTAMPTZ(6),
    "expires_at" TIMESTAMPTZ(6) NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "async_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "subscriptions" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "callback_url" TEXT NOT NULL,
    "authorization_ciphertext" BYTEA,
    "event" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "project_id" TEXT,
    "cursor_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "cursor_key" TEXT NOT NULL DEFAULT '',
    "delivered" INTEGER NOT NULL DEFAULT 0,
    "failures" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,
    "last_delivered_at" TIMESTAMPTZ(6),
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "subscriptions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "webhook_registrations_account_id_idx" ON "webhook_registrations"("account_id");

-- CreateIndex
CREATE INDEX "inbox_events_account_id_applied_at_idx" ON "inbox_events"("account_id", "applied_at");

-- CreateIndex
CREATE UNIQUE INDEX "inbox_events_account_id_dedupe_key_key" ON "inbox_events"("account_id", "dedupe_key");

-- CreateIndex
CREATE INDEX "async_requests_account_id_idx" ON "async_requests"("account_id");

-- CreateIndex
CREATE INDEX "subscriptions_account_id_idx" ON "subscriptions"("account_id");
