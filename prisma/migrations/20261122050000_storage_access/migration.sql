-- CreateTable
CREATE TABLE "storage_accesses" (
    "id" BIGSERIAL NOT NULL,
    "account_id" UUID NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "record_id" TEXT NOT NULL,
    "field" TEXT NOT NULL,
    "status" INTEGER NOT NULL,
    "range" TEXT,
    "ip" TEXT,
    "user_agent" TEXT,
    "at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "storage_accesses_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "storage_accesses_account_id_at_idx" ON "storage_accesses"("account_id", "at");
