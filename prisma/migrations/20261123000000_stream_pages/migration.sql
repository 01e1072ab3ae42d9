-- CreateTable
CREATE TABLE "stream_pages" (
    "stream_id" BIGINT NOT NULL,
    "generation" INTEGER NOT NULL,
    "page" INTEGER NOT NULL,
    "per_page" INTEGER NOT NULL,
    "digest" TEXT,
    "ids" TEXT[],
    "has_more" BOOLEAN,
    "written_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "stream_pages_pkey" PRIMARY KEY ("stream_id","generation","page")
);

-- A pass in flight keeps what it has seen: its ids become one row of page 0 (no digest, never reused).
INSERT INTO "stream_pages" ("stream_id", "generation", "page", "per_page", "ids")
SELECT "stream_id", "generation", 0, 0, array_agg("id") FROM "stream_seen" GROUP BY "stream_id", "generation";

-- DropTable
DROP TABLE "stream_seen";
