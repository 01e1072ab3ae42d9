-- Stalled passes: attempts in a row that left a stream's checkpoint where it was (and where, since when,
-- why), the backoff steps a stalled stream has taken and when it may be tried next; and the stream an
-- account's event is about (a stalled or recovered stream), when it is about one.
ALTER TABLE "streams" ADD COLUMN "stall_attempts" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "streams" ADD COLUMN "stall_generation" INTEGER;
ALTER TABLE "streams" ADD COLUMN "stall_page" INTEGER;
ALTER TABLE "streams" ADD COLUMN "stall_since" TIMESTAMPTZ(6);
ALTER TABLE "streams" ADD COLUMN "stall_reason" TEXT;
ALTER TABLE "streams" ADD COLUMN "stalls" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "streams" ADD COLUMN "stall_retry_at" TIMESTAMPTZ(6);

ALTER TABLE "account_events" ADD COLUMN "resource" TEXT;
ALTER TABLE "account_events" ADD COLUMN "scope" TEXT;
