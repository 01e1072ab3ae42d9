-- Any page as fast as the first (issue 26), second layout: chunks of 100 positions that carry each
-- record's ordinal beside its id, stored inline. A page of up to 100 is then a slice of one or two
-- rows read from the table's own pages (no TOAST), and its first and last keys come from the chunks
-- (the two lookups by primary key the first layout needed are gone). Measured on bench [5]'s 200k list,
-- prepared statements one after another: page 1 0.67-0.73 ms, a random page 1.13-1.24 ms with 500-id
-- chunks stored out of line, 0.89-0.90 ms with these.
--
-- Sets computed in the first layout (chunk_size NULL) are not used by readers of this one, and are
-- computed again by the next pass that finishes their stream (or the next write); until then their
-- pages are read by OFFSET, as for any set not valid. Adding columns without defaults rewrites nothing.
ALTER TABLE "record_position_sets" ADD COLUMN "chunk_size" INTEGER;
ALTER TABLE "record_position_chunks" ADD COLUMN "ordinals" BIGINT[];
-- Inline: compressed if need be, out of line only when a row cannot fit a page (very long ids).
ALTER TABLE "record_position_chunks" ALTER COLUMN "ids" SET STORAGE MAIN;
ALTER TABLE "record_position_chunks" ALTER COLUMN "ordinals" SET STORAGE MAIN;
ALTER TABLE "record_position_chunks" SET (toast_tuple_target = 8160);
