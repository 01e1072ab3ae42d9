-- The freshness scheduler (mirror/freshness-plan.ts): per stream, the changes its polls found and the
-- time they covered, both decayed with age, from which it learns how often the list changes.
ALTER TABLE "streams" ADD COLUMN "seen_changes" DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE "streams" ADD COLUMN "observed_ms" DOUBLE PRECISION NOT NULL DEFAULT 0;
