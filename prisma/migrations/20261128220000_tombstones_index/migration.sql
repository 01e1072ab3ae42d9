-- migrate: no-transaction
-- Deleted records (tombstones) by account, resource and when they were mirrored, and only them: the
-- retention purge (mirror/ops/retention.ts) reads an account's tombstones past their retention in
-- order of mirrored_at, which the index of every record made it find by walking past the account's live
-- records (all of them, at every purge). A partitioned table's index is built without blocking writes:
-- on the parent only, then concurrently on each partition, each attached to it (the parent's index is
-- valid once every partition's is). Each statement may run again: a partition's build that failed
-- left its index INVALID and unattached, which the first statement drops.
DO $$
DECLARE i record;
BEGIN
  FOR i IN SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
            WHERE NOT x.indisvalid AND c.relname LIKE 'records\_%\_tombstones\_idx' AND c.relkind = 'i' AND NOT c.relispartition
  LOOP
    EXECUTE format('DROP INDEX IF EXISTS %I', i.relname);
  END LOOP;
END $$;

CREATE INDEX IF NOT EXISTS "records_tombstones_idx" ON ONLY "records" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_projects_tombstones_idx" ON "records_projects" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_projects_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_jobs_tombstones_idx" ON "records_jobs" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_jobs_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_customers_tombstones_idx" ON "records_customers" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_customers_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_appointments_tombstones_idx" ON "records_appointments" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_appointments_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_leads_tombstones_idx" ON "records_leads" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_leads_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_opportunities_tombstones_idx" ON "records_opportunities" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_opportunities_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_activities_tombstones_idx" ON "records_activities" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_activities_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_vendors_tombstones_idx" ON "records_vendors" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_vendors_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ap_invoices_tombstones_idx" ON "records_ap_invoices" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ap_invoices_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ap_invoice_line_items_tombstones_idx" ON "records_ap_invoice_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ap_invoice_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_cost_codes_tombstones_idx" ON "records_cost_codes" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_cost_codes_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_budget_line_items_tombstones_idx" ON "records_budget_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_budget_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_actual_production_quantities_tombstones_idx" ON "records_actual_production_quantities" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_actual_production_quantities_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_drawings_tombstones_idx" ON "records_drawings" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_drawings_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_drawing_versions_tombstones_idx" ON "records_drawing_versions" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_drawing_versions_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_documents_tombstones_idx" ON "records_documents" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_documents_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_specification_sections_tombstones_idx" ON "records_specification_sections" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_specification_sections_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_photos_tombstones_idx" ON "records_photos" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_photos_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_folders_tombstones_idx" ON "records_folders" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_folders_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_files_tombstones_idx" ON "records_files" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_files_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_file_versions_tombstones_idx" ON "records_file_versions" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_file_versions_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_default_tombstones_idx" ON "records_default" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_default_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ap_payments_tombstones_idx" ON "records_ap_payments" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ap_payments_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ap_payment_line_items_tombstones_idx" ON "records_ap_payment_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ap_payment_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ar_invoices_tombstones_idx" ON "records_ar_invoices" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ar_invoices_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ar_invoice_line_items_tombstones_idx" ON "records_ar_invoice_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ar_invoice_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ar_payments_tombstones_idx" ON "records_ar_payments" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ar_payments_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ar_payment_line_items_tombstones_idx" ON "records_ar_payment_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ar_payment_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_assets_tombstones_idx" ON "records_assets" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_assets_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_bank_accounts_tombstones_idx" ON "records_bank_accounts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_bank_accounts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_batches_tombstones_idx" ON "records_batches" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_batches_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_budget_production_quantities_tombstones_idx" ON "records_budget_production_quantities" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_budget_production_quantities_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_budget_transfers_tombstones_idx" ON "records_budget_transfers" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_budget_transfers_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_budget_transfer_line_items_tombstones_idx" ON "records_budget_transfer_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_budget_transfer_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_change_events_tombstones_idx" ON "records_change_events" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_change_events_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_change_event_line_items_tombstones_idx" ON "records_change_event_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_change_event_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_change_orders_tombstones_idx" ON "records_change_orders" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_change_orders_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_change_order_line_items_tombstones_idx" ON "records_change_order_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_change_order_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_checklist_templates_tombstones_idx" ON "records_checklist_templates" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_checklist_templates_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_checklists_tombstones_idx" ON "records_checklists" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_checklists_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_contacts_tombstones_idx" ON "records_contacts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_contacts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_coordination_issues_tombstones_idx" ON "records_coordination_issues" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_coordination_issues_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_cost_projections_tombstones_idx" ON "records_cost_projections" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_cost_projections_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_cost_types_tombstones_idx" ON "records_cost_types" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_cost_types_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_customer_contacts_tombstones_idx" ON "records_customer_contacts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_customer_contacts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_departments_tombstones_idx" ON "records_departments" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_departments_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_drawing_areas_tombstones_idx" ON "records_drawing_areas" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_drawing_areas_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_employees_tombstones_idx" ON "records_employees" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_employees_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_estimates_tombstones_idx" ON "records_estimates" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_estimates_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_estimate_line_items_tombstones_idx" ON "records_estimate_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_estimate_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_expenses_tombstones_idx" ON "records_expenses" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_expenses_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_expense_line_items_tombstones_idx" ON "records_expense_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_expense_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_inventory_locations_tombstones_idx" ON "records_inventory_locations" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_inventory_locations_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_issues_tombstones_idx" ON "records_issues" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_issues_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_item_receipts_tombstones_idx" ON "records_item_receipts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_item_receipts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_item_receipt_line_items_tombstones_idx" ON "records_item_receipt_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_item_receipt_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_items_tombstones_idx" ON "records_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_job_costs_tombstones_idx" ON "records_job_costs" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_job_costs_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ledger_accounts_tombstones_idx" ON "records_ledger_accounts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ledger_accounts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ledger_journal_entries_tombstones_idx" ON "records_ledger_journal_entries" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ledger_journal_entries_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ledger_journal_entry_line_items_tombstones_idx" ON "records_ledger_journal_entry_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ledger_journal_entry_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_ledger_journals_tombstones_idx" ON "records_ledger_journals" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_ledger_journals_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_locations_tombstones_idx" ON "records_locations" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_locations_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_observations_tombstones_idx" ON "records_observations" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_observations_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_prime_contracts_tombstones_idx" ON "records_prime_contracts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_prime_contracts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_prime_contract_change_orders_tombstones_idx" ON "records_prime_contract_change_orders" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_prime_contract_change_orders_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_prime_contract_line_items_tombstones_idx" ON "records_prime_contract_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_prime_contract_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_purchase_orders_tombstones_idx" ON "records_purchase_orders" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_purchase_orders_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_purchase_order_compliances_tombstones_idx" ON "records_purchase_order_compliances" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_purchase_order_compliances_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_purchase_order_line_items_tombstones_idx" ON "records_purchase_order_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_purchase_order_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_all_purchase_order_compliances_tombstones_idx" ON "records_all_purchase_order_compliances" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_all_purchase_order_compliances_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_rfis_tombstones_idx" ON "records_rfis" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_rfis_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_service_sites_tombstones_idx" ON "records_service_sites" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_service_sites_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_specification_section_versions_tombstones_idx" ON "records_specification_section_versions" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_specification_section_versions_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_sub_jobs_tombstones_idx" ON "records_sub_jobs" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_sub_jobs_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_subcontract_claims_tombstones_idx" ON "records_subcontract_claims" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_subcontract_claims_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_subcontract_claim_line_items_tombstones_idx" ON "records_subcontract_claim_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_subcontract_claim_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_subcontracts_tombstones_idx" ON "records_subcontracts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_subcontracts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_subcontract_change_orders_tombstones_idx" ON "records_subcontract_change_orders" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_subcontract_change_orders_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_subcontract_compliances_tombstones_idx" ON "records_subcontract_compliances" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_subcontract_compliances_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_subcontract_line_items_tombstones_idx" ON "records_subcontract_line_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_subcontract_line_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_all_subcontract_compliances_tombstones_idx" ON "records_all_subcontract_compliances" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_all_subcontract_compliances_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_submittal_packages_tombstones_idx" ON "records_submittal_packages" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_submittal_packages_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_submittals_tombstones_idx" ON "records_submittals" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_submittals_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_tax_codes_tombstones_idx" ON "records_tax_codes" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_tax_codes_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_timecard_entries_tombstones_idx" ON "records_timecard_entries" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_timecard_entries_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_transmittals_tombstones_idx" ON "records_transmittals" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_transmittals_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_units_of_measure_tombstones_idx" ON "records_units_of_measure" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_units_of_measure_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_vendor_compliances_tombstones_idx" ON "records_vendor_compliances" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_vendor_compliances_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_vendor_contacts_tombstones_idx" ON "records_vendor_contacts" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_vendor_contacts_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_all_vendor_compliances_tombstones_idx" ON "records_all_vendor_compliances" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_all_vendor_compliances_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_wbs_tombstones_idx" ON "records_wbs" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_wbs_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_wbs_segments_tombstones_idx" ON "records_wbs_segments" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_wbs_segments_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_wbs_segment_items_tombstones_idx" ON "records_wbs_segment_items" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_wbs_segment_items_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_work_logs_tombstones_idx" ON "records_work_logs" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_work_logs_tombstones_idx";

CREATE INDEX CONCURRENTLY IF NOT EXISTS "records_work_orders_tombstones_idx" ON "records_work_orders" ("account_id", "resource", "mirrored_at") WHERE "deleted_at" IS NOT NULL;
ALTER INDEX "records_tombstones_idx" ATTACH PARTITION "records_work_orders_tombstones_idx";
