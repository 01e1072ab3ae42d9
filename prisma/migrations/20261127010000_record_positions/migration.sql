-- Any page as fast as the first (issue 26): a dense position per stream, so that page N of a list is a
-- range of positions, not an OFFSET over every key before it (976 ms cold at offset 150k of 200k).
-- New tables only: nothing here locks or rewrites `records`, so reads and writes go on while it runs.
--
-- record_position_sets: one row per stream (account, resource, scope). Every write that changes the
-- stream's records bumps `version` (mirror/records-store.ts, in the writing transaction); a finished
-- pass computes the positions and sets `valid_version` to the version they hold for. Readers use the
-- positions only where `valid_version = version` in their own snapshot (else the OFFSET query).
CREATE TABLE "record_position_sets" (
    "account_id" UUID NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "version" BIGINT NOT NULL DEFAULT 0,
    "valid_version" BIGINT,
    "live" INTEGER NOT NULL DEFAULT 0,
    "computed_at" TIMESTAMPTZ(6),

    -- No foreign key to linked_accounts, as records has none: a set lives exactly as long as its records.
    CONSTRAINT "record_position_sets_pkey" PRIMARY KEY ("account_id","resource","scope")
);

-- record_position_chunks: the stream's live record ids in the upstream's order (ordinal, then id),
-- 500 to a row: chunk c holds positions 500c .. 500c+499. A delete near the front shifts every later
-- position: in chunks that rewrites ~400 narrow rows for 200k records, where a position column on
-- records would rewrite 200k wide rows (and their five indexes).
CREATE TABLE "record_position_chunks" (
    "account_id" UUID NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "chunk" INTEGER NOT NULL,
    "ids" TEXT[],

    CONSTRAINT "record_position_chunks_pkey" PRIMARY KEY ("account_id","resource","scope","chunk"),
    CONSTRAINT "record_position_chunks_set_fkey" FOREIGN KEY ("account_id","resource","scope") REFERENCES "record_position_sets"("account_id","resource","scope") ON DELETE CASCADE ON UPDATE CASCADE
);

-- A page reads a slice of one or two chunks: stored uncompressed, a read copies ~15 kB and decompresses nothing.
ALTER TABLE "record_position_chunks" ALTER COLUMN "ids" SET STORAGE EXTERNAL;
