-- CreateTable
CREATE TABLE "rate_budgets" (
    "key" TEXT NOT NULL,
    "total" INTEGER,
    "window_ms" INTEGER NOT NULL,
    "remaining" INTEGER,
    "resets_at" TIMESTAMPTZ(6),
    "spacing_ms" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "next_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "blocked_until" TIMESTAMPTZ(6),
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "rate_budgets_pkey" PRIMARY KEY ("key")
);

-- CreateTable
CREATE TABLE "rate_leases" (
    "key" TEXT NOT NULL,
    "slot" INTEGER NOT NULL,
    "holder" TEXT,
    "expires_at" TIMESTAMPTZ(6),
    "claimed_by" TEXT,
    "claimed_at" TIMESTAMPTZ(6),

    CONSTRAINT "rate_leases_pkey" PRIMARY KEY ("key","slot")
);
