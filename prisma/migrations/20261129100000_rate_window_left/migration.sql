-- Requests a budget's window has left before its reset: the last report's, less the requests it could
-- not count, less each slot reserved before the reset since. An application's call takes no slot a
-- spacing early from a window this count says is spent (earlySlot in connectors/governor/pacing.ts).
ALTER TABLE "rate_budgets" ADD COLUMN "window_left" INTEGER;
