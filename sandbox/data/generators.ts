// Field generators: the unified fields of record i of a resource, from its own seeded Rng.
// Identity (id, source_id) and timestamps are added by the dataset; storage URLs come from a callback.
import { resourceDef } from '../../lib/resources.ts';
import { childSpecs, isChild, type ResourceName } from './catalog.ts';
import type { Rng } from './random.ts';
import * as w from './vocabulary.ts';

export type Fields = Record<string, unknown>;

export interface GenInput {
  rng: Rng;
  i: number;
  /** Service id of record `index` of another resource of the same account (null if unsupported). */
  ref(resource: ResourceName, index: number): string | null;
  /** Records per list of another resource (0 if unsupported). */
  count(resource: ResourceName): number;
  projectId: string | null;
  parent: { id: string; index: number; fields: Fields } | null;
  /** Signed storage URLs for a file-like record. */
  fileUrls(filename: string, size: number): { url: string; preview_url: string };
  /** Embedded children (AP invoice line items), generated first. */
  children: Fields[];
  /** Folder count of the project (folder 0 is the root). */
  folderCount: number;
  /** Service id of the account's n-th user (creators). */
  userId(n: number): string;
  /** Whether this record is one of the few very large files (over 100 MB). */
  large: boolean;
}

function dateOnly(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

const DAY = 86_400_000;
const EPOCH = Date.UTC(2023, 0, 1);

function someDate(rng: Rng, fromDays: number, toDays: number): string {
  return dateOnly(EPOCH + rng.int(fromDays, toDays) * DAY);
}

function person(rng: Rng): { first: string; last: string; name: string } {
  const first = rng.pick(w.firstNames);
  const last = rng.pick(w.lastNames);
  return { first, last, name: `${first} ${last}` };
}

function companyName(rng: Rng): string {
  return `${rng.pick(w.companyWords)} ${rng.pick(w.companySuffixes)} ${rng.pick(w.legalSuffixes)}`;
}

function address(rng: Rng) {
  const [city, state] = rng.pick(w.cities);
  return {
    street_1: `${rng.int(10, 9999)} ${rng.pick(w.streets)}`,
    street_2: rng.chance(0.2) ? `Suite ${rng.int(100, 900)}` : null,
    city,
    state,
    postal_code: rng.digits(5),
    country: 'US',
  };
}

function phone(rng: Rng): string {
  return `+1-${rng.int(200, 989)}-555-${rng.digits(4)}`;
}

// Names come from small word lists: each slug is made once (bounded, for any other text).
const slugs = new Map<string, string>();

function slugify(s: string): string {
  let slug = slugs.get(s);
  if (slug === undefined) {
    slug = s
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '');
    if (slugs.size >= 10_000) slugs.clear();
    slugs.set(s, slug);
  }
  return slug;
}

function money(n: number): string {
  return n.toFixed(2);
}

function fileKind(rng: Rng): [string, string] {
  return rng.pick(w.fileKinds);
}

function creator(g: GenInput): string | null {
  // Creators are the account's users, named by a stable UUID per user number.
  return g.userId(g.rng.int(0, 9));
}

const generators: Partial<Record<ResourceName, (g: GenInput) => Fields>> = {
  projects(g) {
    const r = g.rng;
    const start = EPOCH + r.int(-400, 500) * DAY;
    return {
      address: address(r),
      amount: r.money(250_000, 80_000_000),
      completion_date: dateOnly(start + r.int(120, 900) * DAY),
      name: `${rng2city(r)} ${r.pick(w.projectKinds)}`,
      number: `${23 + Math.floor(g.i / 100)}-${String(g.i + 1).padStart(3, '0')}`,
      start_date: dateOnly(start),
      status: r.pick(w.projectStatuses),
      type: r.pick(w.projectTypes),
    };
  },
  jobs(g) {
    const r = g.rng;
    return {
      name: `${r.pick(w.jobKinds)} #${1000 + g.i}`,
      status: r.pick(w.jobStatuses),
      description: `${r.pick(w.jobKinds)} at ${address(r).street_1}`,
    };
  },
  customers(g) {
    const r = g.rng;
    const name = companyName(r);
    const parentIndex = g.i > 5 && r.chance(0.1) ? r.int(0, Math.min(5, g.i - 1)) : -1;
    return {
      addresses: [{ type: 'billing', ...address(r) }, ...(r.chance(0.4) ? [{ type: 'shipping', ...address(r) }] : [])],
      balance: r.money(0, 250_000),
      currency_code: r.pick(w.currencies),
      email: `ap@${slugify(name)}.example.com`,
      name,
      parent_id: parentIndex >= 0 ? g.ref('customers', parentIndex) : null,
      phone: phone(r),
      status: r.pick(w.customerStatuses),
      tax_code_id: r.chance(0.7) ? `TAX-${r.int(1, 9)}` : null,
      terms: r.pick(w.terms),
      type: r.chance(0.8) ? 'company' : 'individual',
      website: `https://${slugify(name)}.example.com`,
    };
  },
  vendors(g) {
    const r = g.rng;
    const name = companyName(r);
    return {
      addresses: [{ type: 'remit_to', ...address(r) }],
      currency_code: r.pick(w.currencies),
      email: `billing@${slugify(name)}.example.com`,
      name,
      phone: phone(r),
      status: r.chance(0.9) ? 'Active' : 'Inactive',
      tax_number: `${r.digits(2)}-${r.digits(7)}`,
      website: `https://${slugify(name)}.example.com`,
    };
  },
  appointments(g) {
    const r = g.rng;
    const start = EPOCH + r.int(0, 700) * DAY + r.int(7, 16) * 3_600_000;
    const minutes = r.int(30, 300);
    const done = r.chance(0.6);
    return {
      actual_duration: done ? minutes * 60 : null,
      actual_end_time: done ? new Date(start + minutes * 60_000).toISOString() : null,
      actual_start_time: done ? new Date(start).toISOString() : null,
      address: address(r),
      appointment_number: `A-${100000 + g.i}`,
      arrival_window_end_time: new Date(start + 2 * 3_600_000).toISOString(),
      description: `${r.pick(w.jobKinds)} visit`,
      status: done ? 'Done' : r.pick(w.appointmentStatuses),
    };
  },
  leads(g) {
    const r = g.rng;
    const p = person(r);
    return {
      address: address(r),
      contact: { name: p.name, email: `${p.first.toLowerCase()}.${p.last.toLowerCase()}@example.com`, phone: phone(r) },
      customer: companyName(r),
      description: `Interested in ${r.pick(w.projectKinds).toLowerCase()}`,
      industry: r.pick(w.industries),
      status: r.pick(w.leadStatuses),
      type: r.chance(0.5) ? 'Inbound' : 'Outbound',
    };
  },
  opportunities(g) {
    const r = g.rng;
    const stage = r.pick(w.stages);
    return {
      amount: r.money(5_000, 2_000_000),
      close_date: someDate(r, 30, 800),
      creator_id: creator(g),
      customer_id: g.count('customers') > 0 ? g.ref('customers', r.int(0, g.count('customers') - 1)) : null,
      description: `${r.pick(w.projectKinds)} opportunity`,
      name: `${companyName(r)} - ${r.pick(w.projectKinds)}`,
      probability: stage === 'Closed Won' ? 100 : stage === 'Closed Lost' ? 0 : r.int(1, 9) * 10,
      stage,
      status: stage.startsWith('Closed') ? 'Closed' : 'Open',
      type: r.chance(0.6) ? 'New Business' : 'Existing Business',
    };
  },
  activities(g) {
    const r = g.rng;
    const start = EPOCH + r.int(0, 700) * DAY + r.int(8, 17) * 3_600_000;
    const type = r.pick(w.activityTypes);
    return {
      name: `${type} with ${person(r).name}`,
      type,
      description: `${type} about ${r.pick(w.projectKinds).toLowerCase()}`,
      start_time: new Date(start).toISOString(),
      end_time: new Date(start + r.int(1, 6) * 1_800_000).toISOString(),
      opportunity_id: g.count('opportunities') > 0 ? g.ref('opportunities', r.int(0, g.count('opportunities') - 1)) : null,
      customer_id: g.count('customers') > 0 ? g.ref('customers', r.int(0, g.count('customers') - 1)) : null,
      status: r.chance(0.7) ? 'Completed' : 'Planned',
    };
  },
  files(g) {
    const r = g.rng;
    const [ext, mime] = fileKind(r);
    const base = `${r.pick(w.documentTitles)} ${g.i + 1}`;
    const filename = `${slugify(base)}.${ext}`;
    const size = g.large ? r.int(150_000_000, 320_000_000) : r.int(2_000, 4_000_000);
    const versions = r.int(1, 3);
    return {
      creator_id: creator(g),
      file_version_id: g.ref('file-versions', versions - 1),
      filename,
      folder_id: g.folderCount > 0 ? g.ref('folders', g.i % g.folderCount) : null,
      name: base,
      notes: r.chance(0.3) ? 'Issued for construction' : null,
      project_id: g.projectId,
      size: String(size),
      type: mime,
      version: String(versions),
      ...g.fileUrls(filename, size),
    };
  },
  'file-versions'(g) {
    const r = g.rng;
    const parent = g.parent!.fields;
    const filename = typeof parent.filename === 'string' ? parent.filename : 'file';
    const size = r.int(2_000, 4_000_000);
    return {
      creator_id: creator(g),
      file_version_id: null,
      file_id: g.parent!.id,
      filename,
      name: typeof parent.name === 'string' ? parent.name : filename,
      version: String(g.i + 1),
      ...g.fileUrls(filename, size),
    };
  },
  folders(g) {
    const r = g.rng;
    if (g.i === 0) return { name: 'Project Files', parent_id: null, project_id: g.projectId };
    // A ternary tree: folder i hangs under folder floor((i - 1) / 3).
    return {
      name: `${r.pick(w.folderNames)} ${g.i}`,
      parent_id: g.ref('folders', Math.floor((g.i - 1) / 3)),
      project_id: g.projectId,
    };
  },
  photos(g) {
    const r = g.rng;
    const name = `${r.pick(w.photoSubjects)} ${g.i + 1}`;
    const filename = `IMG_${String(4000 + g.i).padStart(5, '0')}.jpg`;
    const size = r.int(800_000, 9_000_000);
    const urls = g.fileUrls(filename, size);
    return {
      capture_time: new Date(EPOCH + r.int(0, 700) * DAY + r.int(25_000, 60_000) * 1000).toISOString(),
      creator_id: creator(g),
      description: r.chance(0.5) ? `${name}, looking ${r.pick(['north', 'south', 'east', 'west'])}` : null,
      file_url: urls.url,
      latitude: Math.round((30 + r.next() * 15) * 1e6) / 1e6,
      longitude: Math.round((-120 + r.next() * 45) * 1e6) / 1e6,
      name,
      preview_url: urls.preview_url,
      project_id: g.projectId,
      size: String(size),
    };
  },
  drawings(g) {
    const r = g.rng;
    const discipline = r.pick(w.disciplines);
    const number = `${discipline[0]}-${100 + g.i}`;
    const filename = `${number}.pdf`;
    const versions = r.int(1, 3);
    const size = r.int(200_000, 12_000_000);
    return {
      creator_id: creator(g),
      discipline,
      drawing_version_id: g.ref('drawing-versions', versions - 1),
      filename,
      name: `${discipline} ${r.pick(['Plan', 'Elevation', 'Section', 'Details', 'Schedule'])} Level ${r.int(1, 9)}`,
      number,
      version: String(versions),
      project_id: g.projectId,
      ...g.fileUrls(filename, size),
    };
  },
  'drawing-versions'(g) {
    const r = g.rng;
    const parent = g.parent!.fields;
    const filename = typeof parent.filename === 'string' ? parent.filename : 'drawing.pdf';
    return {
      creator_id: creator(g),
      drawing_id: g.parent!.id,
      drawing_version_id: null,
      filename,
      name: typeof parent.name === 'string' ? parent.name : filename,
      number: parent.number,
      version: String(g.i + 1),
      ...g.fileUrls(filename, r.int(200_000, 12_000_000)),
    };
  },
  documents(g) {
    const r = g.rng;
    const [ext, mime] = fileKind(r);
    const name = `${r.pick(w.documentTitles)} ${String(g.i + 1).padStart(3, '0')}`;
    const filename = `${slugify(name)}.${ext}`;
    const size = r.int(5_000, 6_000_000);
    return {
      name,
      project_id: g.projectId,
      creator_id: creator(g),
      folder_id: g.folderCount > 0 ? g.ref('folders', r.int(0, g.folderCount - 1)) : null,
      size: String(size),
      type: mime,
      filename,
      ...g.fileUrls(filename, size),
    };
  },
  'specification-sections'(g) {
    const r = g.rng;
    const division = g.i % w.specDivisions.length;
    const number = `${String(division + 1).padStart(2, '0')} ${String(10 + Math.floor(g.i / w.specDivisions.length) * 10).padStart(2, '0')} 00`;
    const filename = `${number.replace(/ /g, '')}.pdf`;
    return {
      name: `${w.specDivisions[division]} ${Math.floor(g.i / w.specDivisions.length) + 1}`,
      number,
      section_version_id: null,
      project_id: g.projectId,
      ...g.fileUrls(filename, r.int(50_000, 3_000_000)),
    };
  },
  'actual-production-quantities'(g) {
    const r = g.rng;
    const codes = g.count('cost-codes');
    return {
      cost_code_id: codes > 0 ? g.ref('cost-codes', r.int(0, codes - 1)) : null,
      cost_type_id: `CT-${r.int(1, 5)}`,
      date: someDate(r, 0, 700),
      project_id: g.projectId,
      quantity: r.int(1, 5000) / 10,
      status: r.chance(0.8) ? 'approved' : 'pending',
      sub_job_id: r.chance(0.3) ? `SJ-${r.int(1, 20)}` : null,
      wbs_id: `WBS-${r.int(1, 40)}`,
    };
  },
  'budget-line-items'(g) {
    const r = g.rng;
    const codes = g.count('cost-codes');
    const quantity = r.int(1, 2000);
    const unitCost = r.money(5, 900);
    const original = Math.round(quantity * unitCost * 100) / 100;
    return {
      cost_code_id: codes > 0 ? g.ref('cost-codes', g.i % codes) : null,
      cost_type_id: `CT-${r.int(1, 5)}`,
      current_amount: money(original + r.money(-original * 0.1, original * 0.2)),
      name: `${r.pick(w.costCodeNames)} - ${r.pick(['Labor', 'Material', 'Equipment', 'Subcontract'])}`,
      original_amount: money(original),
      quantity: String(quantity),
      unit_of_measure: r.pick(w.units),
      unit_cost: money(unitCost),
      wbs_id: `WBS-${r.int(1, 40)}`,
    };
  },
  'cost-codes'(g) {
    const r = g.rng;
    const division = Math.floor(g.i / 10);
    return {
      name: `${w.costCodeNames[g.i % w.costCodeNames.length]}${division > 0 ? ` ${division + 1}` : ''}`,
      code: `${String(division + 1).padStart(2, '0')}-${String((g.i % 10) * 100).padStart(3, '0')}`,
      parent_id: null,
      project_id: g.projectId,
      status: r.chance(0.95) ? 'active' : 'inactive',
    };
  },
  'ap-invoices'(g) {
    const r = g.rng;
    const lines = g.children;
    const subtotal = lines.reduce((s, l) => s + Number(l.amount ?? 0), 0);
    const tax = lines.reduce((s, l) => s + Number(l.tax_amount ?? 0), 0);
    const misc = r.chance(0.2) ? r.money(10, 500) : 0;
    const retentionPercent = r.chance(0.4) ? 10 : 0;
    const retention = Math.round(subtotal * retentionPercent) / 100;
    const total = Math.round((subtotal + tax + misc) * 100) / 100;
    const discount = r.chance(0.2) ? Math.round(total * 2) / 100 : 0;
    const issue = EPOCH + r.int(0, 700) * DAY;
    const status = r.pick(w.invoiceStatuses);
    const paid = status === 'Paid' ? total : status === 'Partially Paid' ? Math.round(total * 50) / 100 : 0;
    const vendors = g.count('vendors');
    const projects = g.count('projects');
    return {
      amount_due: Math.round((total - paid - retention) * 100) / 100,
      ap_payment_ids: paid > 0 ? [`PMT-${r.digits(6)}`] : [],
      attachments: r.chance(0.5) ? [{ name: `invoice-${g.i + 1}.pdf`, content_type: 'application/pdf' }] : [],
      creator_id: creator(g),
      currency_code: 'USD',
      description: `Invoice for ${r.pick(w.costCodeNames).toLowerCase()}`,
      discount_amount: discount,
      discount_date: discount > 0 ? dateOnly(issue + 10 * DAY) : null,
      due_date: dateOnly(issue + 30 * DAY),
      issue_date: dateOnly(issue),
      line_items: lines,
      misc_amount: misc,
      net_amount: Math.round((total - discount) * 100) / 100,
      number: `INV-${r.digits(5)}`,
      project_id: projects > 0 ? g.ref('projects', r.int(0, projects - 1)) : null,
      retention_amount: retention,
      retention_percent: retentionPercent,
      status,
      subtotal_amount: Math.round(subtotal * 100) / 100,
      tax_amount: Math.round(tax * 100) / 100,
      total_amount: total,
      vendor_id: vendors > 0 ? g.ref('vendors', r.int(0, vendors - 1)) : null,
    };
  },
  'ap-invoice-line-items'(g) {
    const r = g.rng;
    const quantity = r.int(1, 40);
    const unitCost = r.money(10, 2_500);
    const amount = Math.round(quantity * unitCost * 100) / 100;
    const codes = g.count('cost-codes');
    const projects = g.count('projects');
    return {
      amount,
      change_order: r.chance(0.1) ? `CO-${r.int(1, 30)}` : null,
      contract: r.chance(0.3) ? `SC-${r.int(100, 999)}` : null,
      cost_code_id: codes > 0 ? g.ref('cost-codes', r.int(0, codes - 1)) : null,
      cost_type_id: `CT-${r.int(1, 5)}`,
      customer_id: null,
      description: `${r.pick(w.costCodeNames)} ${r.pick(['labor', 'materials', 'equipment rental', 'services'])}`,
      item_id: `ITEM-${r.int(1, 300)}`,
      ledger_account_id: `GL-${r.int(5000, 5999)}`,
      project_id: projects > 0 ? g.ref('projects', r.int(0, projects - 1)) : null,
      quantity,
      status: 'Open',
      tax_amount: Math.round(amount * 7) / 100,
      tax_code_id: `TAX-${r.int(1, 9)}`,
      type: r.chance(0.8) ? 'expense' : 'item',
      unit_cost: unitCost,
      unit_of_measure: r.pick(w.units),
      vendor_id: null,
    };
  },
};

function rng2city(r: Rng): string {
  return r.pick(w.cities)[0];
}

/** Status words by what a resource is (its name), for the generic generator. */
function statusesOf(resource: string): readonly string[] {
  if (/rfi|submittal|observation|issue|checklist|transmittal|coordination/.test(resource)) return w.workflowStatuses;
  if (/contract|order|change|claim|compliance/.test(resource)) return w.contractStatuses;
  if (/invoice|payment|expense|journal|batch|receipt|estimate|transfer/.test(resource)) return w.invoiceStatuses;
  return w.recordStatuses;
}

/** The resource a `*_id` field names, if the account's source system serves one (`cost_code_id` -> `cost-codes`). */
function referenced(field: string): ResourceName[] {
  const base = field.replace(/_ids?$/, '').replace(/_/g, '-');
  const last = base.split('-').at(-1)!;
  const people = ['assignee', 'creator', 'technician-employee', 'employee', 'contact'];
  const out: string[] = [`${base}s`, base.replace(/y$/, 'ies'), base];
  if (people.includes(base)) out.push('employees', 'contacts');
  if (base === 'package') out.push('submittal-packages');
  if (base.endsWith('location')) out.push('locations', 'inventory-locations');
  if (base.endsWith('account')) out.push('ledger-accounts', 'bank-accounts');
  out.push(`${last}s`);
  return out as ResourceName[];
}

const dateField = /(^|_)date$/;
const timeField = /_time$/;
const moneyField = /(^|_)(amount|balance|cost_impact)$|^(unit_cost|unit_price|cost_at_completion|actual_unit_cost|payment_rate)$/;
const quantityField = /(^|_)quantity$|^hours$/;
const percentField = /_percent$|^probability$/;

/**
 * Fields of a record of the real service's other resources, from the field names its catalog entry
 * lists (the reference's write fields): ids reference records of this account's other lists (the
 * parent's own id for `<parent>_id`), dates and times, amounts, quantities, statuses, names and
 * numbers. Every value draws from the record's own Rng, in the entry's field order.
 */
function genericFields(resource: ResourceName, g: GenInput): Fields {
  const r = g.rng;
  const def = resourceDef(resource);
  const parentField = isChild(resource) ? `${childSpecs[resource].parent.replace(/ies$/, 'y').replace(/s$/, '').replace(/-/g, '_')}_id` : null;
  const title = resource
    .replace(/^all-/, '')
    .replace(/-/g, ' ')
    .replace(/ies$/, 'y')
    .replace(/s$/, '')
    .replace(/\b\w/g, (c) => c.toUpperCase());
  const prefix = resource
    .replace(/^all-/, '')
    .split('-')
    .map((p) => p[0]!.toUpperCase())
    .join('');
  const out: Fields = {};
  const refOf = (field: string): string | null => {
    for (const target of referenced(field)) {
      if (target === resource) continue;
      const n = g.count(target);
      if (n > 0) return g.ref(target, r.int(0, n - 1));
    }
    return null;
  };
  for (const f of def?.fields ?? []) {
    if (f === 'id' || f === 'source_id' || f === 'source_create_time' || f === 'source_update_time') continue;
    if (f === parentField) out[f] = g.parent?.id ?? null;
    else if (f === 'project_id') out[f] = g.projectId ?? refOf(f);
    else if (f === 'parent_id') out[f] = g.i > 0 && r.chance(0.5) ? g.ref(resource, r.int(0, g.i - 1)) : null;
    else if (f === 'creator_id') out[f] = creator(g);
    else if (f.endsWith('_ids')) out[f] = [refOf(f), refOf(f)].filter((x): x is string => x !== null).filter((x, k, a) => a.indexOf(x) === k);
    else if (f.endsWith('_id')) out[f] = refOf(f) ?? `${f.slice(0, -3).replace(/_/g, '-').toUpperCase()}-${r.int(1, 40)}`;
    else if (dateField.test(f)) out[f] = someDate(r, 0, 800);
    else if (timeField.test(f)) out[f] = new Date(EPOCH + r.int(0, 700) * DAY + r.int(7, 17) * 3_600_000).toISOString();
    else if (moneyField.test(f)) out[f] = r.money(50, 250_000);
    else if (quantityField.test(f)) out[f] = r.int(1, 400) / 2;
    else if (percentField.test(f)) out[f] = r.int(0, 10) * 5;
    else if (f === 'status') out[f] = r.pick(statusesOf(resource));
    else if (f === 'type' || f === 'category' || f === 'ownership_type' || f === 'earnings_type' || f === 'contract_type') out[f] = r.pick(w.recordTypes);
    else if (f === 'name' || f === 'subject') out[f] = `${title} ${g.i + 1}: ${r.pick(w.costCodeNames)}`;
    else if (f === 'number' || f === 'code' || f === 'claim_number' || f === 'ap_invoice_number' || f === 'serial_number')
      out[f] = `${prefix}-${String(g.i + 1).padStart(3, '0')}`;
    else if (f === 'first_name') out[f] = r.pick(w.firstNames);
    else if (f === 'last_name') out[f] = r.pick(w.lastNames);
    else if (f === 'full_name' || f === 'contact_name') out[f] = person(r).name;
    else if (f === 'email') out[f] = `${r.pick(w.firstNames).toLowerCase()}.${r.pick(w.lastNames).toLowerCase()}@example.com`;
    else if (f.endsWith('phone')) out[f] = phone(r);
    else if (f === 'address' || f === 'delivery_address') out[f] = address(r);
    else if (f === 'attachments') out[f] = [];
    else if (f === 'unit_of_measure' || f === 'actual_unit_of_measure') out[f] = r.pick(w.units);
    else if (f === 'currency_code') out[f] = r.pick(w.currencies);
    else if (f === 'terms') out[f] = r.pick(w.terms);
    else if (f === 'job_title') out[f] = r.pick(w.jobTitles);
    else if (f === 'company' || f === 'provider_name' || f === 'make' || f === 'manufacturer') out[f] = companyName(r);
    else if (f === 'website' || f === 'image_url') out[f] = null;
    else if (f === 'version') out[f] = String(g.i + 1);
    else out[f] = `${title} ${f.replace(/_/g, ' ')}: ${r.pick(w.costCodeNames).toLowerCase()}`;
  }
  return out;
}

export function generate(resource: ResourceName, g: GenInput): Fields {
  const own = generators[resource];
  return own ? own(g) : genericFields(resource, g);
}
