-- Each linked account belongs to the mirror API client that linked it, and remembers who the upstream
-- said it is at its first link: a re-link never moves an account to another client, and keeps its
-- data only when the upstream names the same linked company and user again.
--
-- Existing rows keep client_id null: they belong to the configured MIRROR_CLIENT_ID (the mirror reads
-- null as that client), which is the only client `mirror setup` creates. An install that added other
-- clients by hand assigns their accounts with
--   UPDATE linked_accounts SET client_id = '<client id>' WHERE id IN (...);
ALTER TABLE "linked_accounts" ADD COLUMN "client_id" VARCHAR(36),
ADD COLUMN "linked_company_id" TEXT,
ADD COLUMN "linked_user_id" TEXT;

-- What the upstream answered at the link is stored already: its ids become the account's identity.
UPDATE "linked_accounts" SET "linked_company_id" = "linked_company"->>'id', "linked_user_id" = "linked_user"->>'id';

-- CreateIndex
CREATE INDEX "linked_accounts_client_id_reference_id_source_system_idx" ON "linked_accounts"("client_id", "reference_id", "source_system");
