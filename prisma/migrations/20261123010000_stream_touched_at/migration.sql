-- AlterTable: when a record of the stream was last changed outside a pass (events, writes)
ALTER TABLE "streams" ADD COLUMN "touched_at" TIMESTAMPTZ(6);
