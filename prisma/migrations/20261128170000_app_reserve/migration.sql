-- The application's reserve sized by its use: each budget counts the interactive requests (an
-- application's forwarded calls) of its recent windows, in a ring of 8 (slot `n % 8`, 1-based in SQL,
-- counts window `n`, epoch ms / window_ms, when `app_windows` holds `n` there). Background work keeps to
-- what they leave (connectors/governor/reserve.ts), unless MIRROR_SYNC_BUDGET_SHARE fixes its share.
ALTER TABLE "rate_budgets" ADD COLUMN "app_counts" INTEGER[] DEFAULT ARRAY[0, 0, 0, 0, 0, 0, 0, 0]::INTEGER[],
    ADD COLUMN "app_windows" BIGINT[] DEFAULT ARRAY[-1, -1, -1, -1, -1, -1, -1, -1]::BIGINT[];
