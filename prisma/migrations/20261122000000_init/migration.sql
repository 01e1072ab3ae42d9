-- CreateTable
CREATE TABLE "api_clients" (
    "client_id" VARCHAR(36) NOT NULL,
    "secret_hash" CHAR(64) NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "api_clients_pkey" PRIMARY KEY ("client_id")
);

-- CreateTable
CREATE TABLE "linked_accounts" (
    "id" UUID NOT NULL,
    "reference_id" TEXT NOT NULL,
    "source_system" TEXT NOT NULL,
    "source_system_name" TEXT NOT NULL,
    "linked_company" JSONB,
    "linked_user" JSONB,
    "token_ciphertext" BYTEA NOT NULL,
    "token_hash" CHAR(64) NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'linked',
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(6) NOT NULL,
    "unlinked_at" TIMESTAMPTZ(6),

    CONSTRAINT "linked_accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "streams" (
    "id" BIGSERIAL NOT NULL,
    "account_id" UUID NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL DEFAULT '',
    "state" TEXT NOT NULL DEFAULT 'never_synced',
    "generation" INTEGER NOT NULL DEFAULT 0,
    "mode" TEXT,
    "checkpoint" JSONB,
    "pages" INTEGER NOT NULL DEFAULT 0,
    "records" INTEGER NOT NULL DEFAULT 0,
    "pass_started_at" TIMESTAMPTZ(6),
    "last_pass_started_at" TIMESTAMPTZ(6),
    "last_fresh_at" TIMESTAMPTZ(6),
    "last_error" TEXT,
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "streams_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "sync_runs" (
    "id" BIGSERIAL NOT NULL,
    "stream_id" BIGINT NOT NULL,
    "generation" INTEGER NOT NULL,
    "mode" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'running',
    "pages" INTEGER NOT NULL DEFAULT 0,
    "inserted" INTEGER NOT NULL DEFAULT 0,
    "updated" INTEGER NOT NULL DEFAULT 0,
    "unchanged" INTEGER NOT NULL DEFAULT 0,
    "deleted" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "started_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finished_at" TIMESTAMPTZ(6),

    CONSTRAINT "sync_runs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "stream_seen" (
    "stream_id" BIGINT NOT NULL,
    "generation" INTEGER NOT NULL,
    "id" TEXT NOT NULL,

    CONSTRAINT "stream_seen_pkey" PRIMARY KEY ("stream_id","generation","id")
);

-- CreateTable (partitioned by resource: one partition per resource of the catalog, plus a default)
CREATE TABLE "records" (
    "account_id" UUID NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "id" TEXT NOT NULL,
    "source_id" TEXT,
    "data" JSONB NOT NULL,
    "source_data" JSONB,
    "hash" UUID NOT NULL,
    "source_create_time" TIMESTAMPTZ(6),
    "source_update_time" TIMESTAMPTZ(6),
    "first_seen_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "mirrored_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(6),
    "generation" INTEGER NOT NULL,
    "ordinal" BIGINT NOT NULL,

    CONSTRAINT "records_pkey" PRIMARY KEY ("account_id","resource","scope","id")
) PARTITION BY LIST ("resource");

CREATE TABLE "records_projects" PARTITION OF "records" FOR VALUES IN ('projects');
CREATE TABLE "records_jobs" PARTITION OF "records" FOR VALUES IN ('jobs');
CREATE TABLE "records_customers" PARTITION OF "records" FOR VALUES IN ('customers');
CREATE TABLE "records_appointments" PARTITION OF "records" FOR VALUES IN ('appointments');
CREATE TABLE "records_leads" PARTITION OF "records" FOR VALUES IN ('leads');
CREATE TABLE "records_opportunities" PARTITION OF "records" FOR VALUES IN ('opportunities');
CREATE TABLE "records_activities" PARTITION OF "records" FOR VALUES IN ('activities');
CREATE TABLE "records_vendors" PARTITION OF "records" FOR VALUES IN ('vendors');
CREATE TABLE "records_ap_invoices" PARTITION OF "records" FOR VALUES IN ('ap-invoices');
CREATE TABLE "records_ap_invoice_line_items" PARTITION OF "records" FOR VALUES IN ('ap-invoice-line-items');
CREATE TABLE "records_cost_codes" PARTITION OF "records" FOR VALUES IN ('cost-codes');
CREATE TABLE "records_budget_line_items" PARTITION OF "records" FOR VALUES IN ('budget-line-items');
CREATE TABLE "records_actual_production_quantities" PARTITION OF "records" FOR VALUES IN ('actual-production-quantities');
CREATE TABLE "records_drawings" PARTITION OF "records" FOR VALUES IN ('drawings');
CREATE TABLE "records_drawing_versions" PARTITION OF "records" FOR VALUES IN ('drawing-versions');
CREATE TABLE "records_documents" PARTITION OF "records" FOR VALUES IN ('documents');
CREATE TABLE "records_specification_sections" PARTITION OF "records" FOR VALUES IN ('specification-sections');
CREATE TABLE "records_photos" PARTITION OF "records" FOR VALUES IN ('photos');
CREATE TABLE "records_folders" PARTITION OF "records" FOR VALUES IN ('folders');
CREATE TABLE "records_files" PARTITION OF "records" FOR VALUES IN ('files');
CREATE TABLE "records_file_versions" PARTITION OF "records" FOR VALUES IN ('file-versions');
CREATE TABLE "records_default" PARTITION OF "records" DEFAULT;

-- CreateIndex
CREATE UNIQUE INDEX "linked_accounts_token_hash_key" ON "linked_accounts"("token_hash");

-- CreateIndex
CREATE UNIQUE INDEX "streams_account_id_resource_scope_key" ON "streams"("account_id", "resource", "scope");

-- CreateIndex
CREATE UNIQUE INDEX "sync_runs_stream_id_generation_key" ON "sync_runs"("stream_id", "generation");

-- CreateIndex
CREATE INDEX "records_account_id_resource_scope_ordinal_idx" ON "records"("account_id", "resource", "scope", "ordinal");

-- CreateIndex
CREATE INDEX "records_account_id_resource_source_id_idx" ON "records"("account_id", "resource", "source_id");

-- CreateIndex
CREATE INDEX "records_account_id_resource_mirrored_at_idx" ON "records"("account_id", "resource", "mirrored_at");

-- AddForeignKey
ALTER TABLE "streams" ADD CONSTRAINT "streams_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "linked_accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "sync_runs" ADD CONSTRAINT "sync_runs_stream_id_fkey" FOREIGN KEY ("stream_id") REFERENCES "streams"("id") ON DELETE CASCADE ON UPDATE CASCADE;
