-- Read replicas with read-your-writes: the primary's WAL position after each account's last write
-- through the mirror (a write route, an applied webhook event), shared by every API process. An
-- account's reads go to a replica only once the replica has replayed its position. One row per
-- account that wrote; rows at or below every replica's replay position are never read.
CREATE TABLE "account_write_positions" (
    "account_id" UUID NOT NULL,
    "lsn" BIGINT NOT NULL,
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "account_write_positions_pkey" PRIMARY KEY ("account_id")
);
CREATE INDEX "account_write_positions_lsn_idx" ON "account_write_positions"("lsn");
