-- Adaptive polling's budget per pass (issue 22): an incremental pass lists at most a set number of the
-- project lists due only by their clock (mirror/polling.ts). The pass's sweeps run side by side and each
-- decides for its own streams, so the pass's grants and deferrals are kept with the streams:
-- `granted:<pass key>` or `deferred:<pass key>` (only the current pass's value means anything).
ALTER TABLE "streams" ADD COLUMN "poll_budget" TEXT;
