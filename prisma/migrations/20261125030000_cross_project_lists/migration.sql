-- Whether a source system's list of a project-scoped resource accepts `Project-Id: *` (every
-- project's records in one list), as learned from the upstream's answer: a refused `*` is asked
-- for again only once the row is deleted (mirror/cross-project.ts).
CREATE TABLE "cross_project_lists" (
    "source_system" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "accepted" BOOLEAN NOT NULL,
    "reason" TEXT,
    "learned_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "cross_project_lists_pkey" PRIMARY KEY ("source_system","resource")
);
