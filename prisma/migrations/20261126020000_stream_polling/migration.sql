-- Adaptive polling (issue 22, item 5): per stream, when an incremental pass next asks the upstream for
-- it and why (activities/sync.ts decides, mirror/streams.ts `recordPoll` writes), and the polls in a
-- row that found nothing changed (each doubles the interval, up to the full-pass period).
ALTER TABLE "streams" ADD COLUMN "unchanged_polls" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "streams" ADD COLUMN "next_due_at" TIMESTAMPTZ(6);
ALTER TABLE "streams" ADD COLUMN "due_reason" TEXT;
-- The pass (generation) whose outcome the three columns above already count: a retried activity counts it once.
ALTER TABLE "streams" ADD COLUMN "polled_generation" INTEGER;
