-- Idle accounts: when an account was last read or written through the mirror, and since when it is idle
-- (its schedules slowed). Accounts linked before this count as used now, so an upgrade idles none at once.
ALTER TABLE "linked_accounts" ADD COLUMN "last_used_at" TIMESTAMPTZ(6);
ALTER TABLE "linked_accounts" ADD COLUMN "idle_since" TIMESTAMPTZ(6);
UPDATE "linked_accounts" SET "last_used_at" = CURRENT_TIMESTAMP;
