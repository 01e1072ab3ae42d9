// The data of every linked account, computed on demand: record i of a list is a pure function of
// (seed, account, resource, scope, i), with the live-mutation overlay applied on top. Nothing is
// materialised, so a list can hold any number of records and one page costs only its own records.
import { BadRequestError } from '../../lib/errors.ts';
import { childSpecs, contractResourceNames, isChild, listSize, type ResourceName } from './catalog.ts';
import type { Filter, FieldRef, OrderKey, SortKey } from './filters.ts';
import { compareSortKeys, instantOf, matchesFilters, passes, sortKeyOf, timeOnly } from './filters.ts';
import { generate, type Fields, type GenInput } from './generators.ts';
import { isoSeconds } from './iso-time.ts';
import { OverlayStore, type CreatedRecord, type ListOverlay } from './overlay.ts';
import { hash128, hash32, Rng, uuidFromKey } from './random.ts';
import { rawObject } from './raw-source.ts';
import { sourceIdOf } from './source-ids.ts';
import type { SourceSystemProfile } from '../source-systems/profiles.ts';

interface DataAccount {
  /** Derived from reference id and source system: the same pair always sees the same data. */
  key: string;
  profile: SourceSystemProfile;
}

/** A located record used as a scope: its id, a stable key (index, or `n:<id>` if created), its fields. */
export interface Ref {
  id: string;
  key: string;
  index: number | null;
  fields: Fields;
}

export interface Scope {
  company: number;
  project: Ref | null;
  parent: Ref | null;
}

export interface FileRef {
  /** Opaque owner key (a hash of the account key): the storage proxy needs no account lookup. */
  owner: string;
  resource: ResourceName;
  scope: string;
  index: number;
  size: number;
  filename: string;
  /** Whether the source system supports ETag / If-None-Match. */
  etag: boolean;
}
type FileUrlFactory = (ref: FileRef) => { url: string; preview_url: string };

interface DatasetOptions {
  seed: number;
  size: number;
  /** Per-resource list sizes that replace `size`'s rule (see catalog.ts `listSize`). */
  sizes?: Readonly<Record<string, number>>;
  /** Project-scoped lists sized by project instead (see {@link ProjectSkew}). */
  projectSkew?: ProjectSkew;
  fileUrls: FileUrlFactory;
}

/**
 * Accounts shaped like real construction accounts: a few big projects and many small ones. Every
 * project-scoped list (folders aside, which keep their small tree) of the first `bigProjects`
 * projects holds `big` records, of every other project `small`.
 */
export interface ProjectSkew {
  bigProjects: number;
  big: number;
  small: number;
}

interface ListOptions {
  offset: number;
  limit: number;
  filters?: readonly Filter[];
  orderBy?: readonly OrderKey[];
}

/** One record of a selection: its scope (index into the list's scopes) and its entry there. */
interface Selected {
  s: number;
  e: number | CreatedRecord;
}

/**
 * Selections (filtered on record fields, or ordered) kept for paging through them: each page of a
 * 200,000-record list would otherwise make every record again. Few, since each holds an entry per
 * selected record.
 */
const MAX_SELECTIONS = 8;

/**
 * Records a selection may make to read fields other than the timestamps: about 10 µs each, so a
 * million is some 10 s of one core before the first page. Past it the request is refused (400)
 * and told to narrow the list by time first, rather than left to time out.
 */
const MAX_RECORDS_MADE = 1_000_000;

const EPOCH_S = Date.UTC(2023, 0, 1) / 1000;
const DAY_S = 86_400;

/** Files over 100 MB are moved through a file transfer; its id derives from the file's. */
export function fileTransferIdOf(fileId: string): string {
  return uuidFromKey(`file-transfer|${fileId}`);
}

function scopeKey(scope: Scope): string {
  let k = `c${scope.company}`;
  if (scope.project) k += `/p${scope.project.key}`;
  if (scope.parent) k += `/x${scope.parent.key}`;
  return k;
}

/** What `Dataset.eachInPage` hands each record of a page to. */
export interface PageVisitor {
  /** Whether the caller already has record `index` of list `list` (see eachInPage). */
  has?(list: string, index: number): boolean;
  /**
   * Each record in order: its fields (null when `has` said yes), and its list and index when those
   * identify it (`list` null otherwise).
   */
  item(fields: Fields | null, list: string | null, index: number): void;
}

export class Dataset {
  readonly overlay = new OverlayStore();
  private readonly reverse = new Map<string, { byId: Map<string, number>; bySource: Map<string, number> }>();
  /** Storage URLs signed so far: a record that got some is not a function of its key (they expire). */
  private urlsIssued = 0;
  /** Resources whose records carry storage URLs: never keyed. */
  private readonly volatile = new Set<ResourceName>();
  /** Recent selections by list and query, valid while the overlay version they were made at stands. */
  private readonly selections = new Map<string, { version: number; selected: Selected[] }>();

  constructor(private readonly opts: DatasetOptions) {}

  get seed(): number {
    return this.opts.seed;
  }

  get size(): number {
    return this.opts.size;
  }

  supports(acct: DataAccount, resource: ResourceName): boolean {
    return acct.profile.resources[resource] !== undefined;
  }

  idOf(acct: DataAccount, resource: ResourceName | 'users' | 'companies', i: number): string {
    return uuidFromKey(`${this.opts.seed}|${acct.key}|${resource}|${i}`);
  }

  sourceIdOf(acct: DataAccount, resource: ResourceName, i: number): string {
    return sourceIdOf(acct.profile.sourceIdStyle, acct.key, resource, i, isChild(resource));
  }

  /** How many generated records a list holds in a scope (children vary with their parent). */
  count(acct: DataAccount, resource: ResourceName, scope: Scope): number {
    if (!this.supports(acct, resource)) return 0;
    if (isChild(resource)) {
      const parent = scope.parent;
      if (!parent || parent.index === null) return 0;
      const spec = childSpecs[resource];
      // Files and drawings state their version count; line items vary by invoice.
      const stated = Number(parent.fields.version);
      if (resource !== 'ap-invoice-line-items' && Number.isInteger(stated) && stated >= 1) return Math.min(stated, spec.max);
      return spec.min + (hash32(`${this.opts.seed}|${acct.key}|${resource}|${scopeKey(scope)}`) % (spec.max - spec.min + 1));
    }
    const skew = this.opts.projectSkew;
    // The skew sizes the contract's project lists; the real service's others keep a handful per project.
    if (skew && scope.project && scope.project.index !== null && resource !== 'folders' && contractResourceNames.has(resource))
      return scope.project.index < skew.bigProjects ? skew.big : skew.small;
    return listSize(resource, this.opts.size, this.opts.sizes);
  }

  private listKey(acct: DataAccount, resource: ResourceName, scope: Scope): string {
    return `${acct.key}|${resource}|${scopeKey(scope)}`;
  }

  private times(acct: DataAccount, resource: ResourceName, sk: string, i: number): { create: string; update: string } {
    // Straight from one hash (no Rng): filters evaluate times of many records without generating them.
    const [a, b] = hash128(`${this.opts.seed}|${acct.key}|${resource}|${sk}|${i}|t`);
    const create = EPOCH_S + (a % (600 * DAY_S));
    const update = create + (b % (120 * DAY_S));
    return { create: isoSeconds(create), update: isoSeconds(update) };
  }

  /**
   * A generator of one list's records. Everything that depends only on the list is computed once,
   * and one GenInput is reused with its per-record fields replaced: a 1000-record page allocates
   * little besides the records themselves.
   */
  private generator(acct: DataAccount, resource: ResourceName, scope: Scope): (i: number) => Fields {
    const sk = scopeKey(scope);
    const profile = acct.profile;
    const prefix = `${this.opts.seed}|${acct.key}|${resource}|${sk}|`;
    const owner = (hash32(`${this.opts.seed}|${acct.key}`) >>> 0).toString(36);
    const unsupported = profile.resources[resource]?.unsupportedFields ?? [];
    const withLines = resource === 'ap-invoices' && this.supports(acct, 'ap-invoice-line-items');
    const { size, sizes } = this.opts;
    let current = 0;
    // Users and the first few children are referenced constantly: compute their ids once per list.
    const small = new Map<string, string>();
    const smallId = (r: ResourceName | 'users', k: number): string => {
      if (k >= 16) return this.idOf(acct, r, k);
      const key = `${r}|${k}`;
      let id = small.get(key);
      if (id === undefined) small.set(key, (id = this.idOf(acct, r, k)));
      return id;
    };
    const input: GenInput = {
      rng: new Rng(prefix),
      i: 0,
      ref: (r, k) => (this.supports(acct, r) ? smallId(r, k) : null),
      count: (r) => (this.supports(acct, r) ? listSize(r, size, sizes) : 0),
      projectId: scope.project?.id ?? null,
      parent: scope.parent ? { id: scope.parent.id, index: scope.parent.index ?? -1, fields: scope.parent.fields } : null,
      fileUrls: (filename, fileSize) => {
        this.urlsIssued++;
        return this.opts.fileUrls({ owner, resource, scope: sk, index: current, size: fileSize, filename, etag: profile.etags });
      },
      children: [],
      folderCount: this.supports(acct, 'folders') && scope.project ? listSize('folders', size, sizes) : 0,
      userId: (n) => smallId('users', n),
      large: false,
    };
    return (i) => {
      current = i;
      const id = smallId(resource, i);
      input.rng = new Rng(prefix + i);
      input.i = i;
      input.children = withLines ? this.all(acct, 'ap-invoice-line-items', { ...scope, parent: { id, key: String(i), index: i, fields: {} } }) : [];
      input.large = profile.largeFiles && resource === 'files' && i % 20 === 7;
      const fields = generate(resource, input);
      for (const f of unsupported) if (f in fields) fields[f] = null;
      if (input.large) fields.file_transfer_id = fileTransferIdOf(id);
      const t = this.times(acct, resource, sk, i);
      return { id, source_id: this.sourceIdOf(acct, resource, i), ...fields, source_create_time: t.create, source_update_time: t.update };
    };
  }

  private generated(acct: DataAccount, resource: ResourceName, scope: Scope, i: number): Fields {
    return this.generator(acct, resource, scope)(i);
  }

  /** Record i of a list with its patch applied (the caller checked it is not deleted). */
  private record(acct: DataAccount, resource: ResourceName, scope: Scope, i: number, o: ListOverlay | undefined): Fields {
    const base = this.generated(acct, resource, scope, i);
    const p = o?.patches.get(i);
    return p ? { ...base, ...p.patch, id: base.id, source_update_time: p.updatedAt } : base;
  }

  private entries(o: ListOverlay, n: number): Array<number | CreatedRecord> {
    if (!o.entries) {
      const e: Array<number | CreatedRecord> = [];
      for (let i = 0; i < n; i++) if (!o.deleted.has(i)) e.push(i);
      e.push(...o.created);
      o.entries = e;
    }
    return o.entries;
  }

  private entryTimes(acct: DataAccount, resource: ResourceName, sk: string, e: number | CreatedRecord, o: ListOverlay | undefined) {
    if (typeof e !== 'number') {
      return {
        source_create_time: (e.fields.source_create_time as string | null) ?? null,
        source_update_time: (e.fields.source_update_time as string | null) ?? null,
      };
    }
    const t = this.times(acct, resource, sk, e);
    const p = o?.patches.get(e);
    return { source_create_time: t.create, source_update_time: p ? p.updatedAt : t.update };
  }

  /** One page over one or more scopes (several for `Project-Id: *`), in stable creation order. */
  list(acct: DataAccount, resource: ResourceName, scopes: readonly Scope[], options: ListOptions): { items: Fields[]; total: number } {
    const items: Fields[] = [];
    const { total } = this.eachInPage(acct, resource, scopes, options, { item: (fields) => items.push(fields!) });
    return { items, total };
  }

  /**
   * The records of one page, handed to `visitor` one at a time as they are made (nothing of the
   * page need stay alive at once), with `list`'s order and total. A generated, unpatched record
   * whose fields are a pure function of its list key and index (no time-limited storage URLs) is
   * identified by them while `overlay.version` stands: `visitor.has(list, index)` true means the
   * caller has that record already, and it comes as null instead of being generated.
   */
  eachInPage(
    acct: DataAccount,
    resource: ResourceName,
    scopes: readonly Scope[],
    options: ListOptions,
    visitor: PageVisitor,
  ): { returned: number; total: number } {
    let returned = 0;
    let skip = options.offset;
    let total = 0;
    const keyed = visitor.has !== undefined && !this.volatile.has(resource);
    const generated = (gen: (i: number) => Fields, list: string, i: number): void => {
      if (keyed && visitor.has!(list, i)) return visitor.item(null, list, i);
      const urls = this.urlsIssued;
      const fields = gen(i);
      if (this.urlsIssued === urls) return visitor.item(fields, list, i);
      this.volatile.add(resource);
      visitor.item(fields, null, i);
    };
    const filters = options.filters ?? [];
    if ((options.orderBy?.length ?? 0) > 0 || !timeOnly(filters)) {
      const selected = this.selection(acct, resource, scopes, filters, options.orderBy ?? []);
      const gens: Array<((i: number) => Fields) | undefined> = [];
      const lists: string[] = [];
      for (let k = options.offset; k < selected.length && returned < options.limit; k++, returned++) {
        const { s, e } = selected[k]!;
        if (typeof e !== 'number') {
          visitor.item({ ...e.fields }, null, -1);
          continue;
        }
        const scope = scopes[s]!;
        const gen = (gens[s] ??= this.generator(acct, resource, scope));
        const listKey = (lists[s] ??= this.listKey(acct, resource, scope));
        const p = this.overlay.get(listKey)?.patches.get(e);
        if (!p) generated(gen, listKey, e);
        else {
          const base = gen(e);
          visitor.item({ ...base, ...p.patch, id: base.id, source_update_time: p.updatedAt }, null, e);
        }
      }
      return { returned, total: selected.length };
    }
    for (const scope of scopes) {
      const n = this.count(acct, resource, scope);
      const listKey = this.listKey(acct, resource, scope);
      const o = this.overlay.get(listKey);
      if (!o && filters.length === 0) {
        // Fast path: pure arithmetic over indices.
        total += n;
        if (skip < n && returned < options.limit) {
          const gen = this.generator(acct, resource, scope);
          for (let i = skip; i < n && returned < options.limit; i++, returned++) generated(gen, listKey, i);
        }
        skip = Math.max(0, skip - n);
        continue;
      }
      const sk = scopeKey(scope);
      let entries: ReadonlyArray<number | CreatedRecord> = o ? this.entries(o, n) : Array.from({ length: n }, (_, i) => i);
      if (filters.length > 0) entries = entries.filter((e) => matchesFilters(filters, this.entryTimes(acct, resource, sk, e, o)));
      total += entries.length;
      const gen = this.generator(acct, resource, scope);
      for (let k = skip; k < entries.length && returned < options.limit; k++, returned++) {
        const e = entries[k]!;
        if (typeof e !== 'number') visitor.item({ ...e.fields }, null, -1);
        else {
          const p = o?.patches.get(e);
          if (!p) generated(gen, listKey, e);
          else {
            const base = gen(e);
            visitor.item({ ...base, ...p.patch, id: base.id, source_update_time: p.updatedAt }, null, e);
          }
        }
      }
      skip = Math.max(0, skip - entries.length);
    }
    return { returned, total };
  }

  /**
   * The records of a list that pass `filters`, in `orderBy`'s order (ties in the list's own order),
   * as scope and entry. Time filters are tried first, on timestamps alone; a record is made only
   * when a filter or an order key reads one of its other fields.
   */
  private selection(acct: DataAccount, resource: ResourceName, scopes: readonly Scope[], filters: readonly Filter[], orderBy: readonly OrderKey[]): Selected[] {
    const cacheKey = `${scopes.map((sc) => this.listKey(acct, resource, sc)).join(',')}\n${JSON.stringify(filters.map((f) => [f.field, f.operator, f.value]))}\n${JSON.stringify(orderBy.map((k) => [k.field, k.desc]))}`;
    const version = this.overlay.version;
    const hit = this.selections.get(cacheKey);
    if (hit && hit.version === version) {
      // Most recently used last: the first key is the one to drop.
      this.selections.delete(cacheKey);
      this.selections.set(cacheKey, hit);
      return hit.selected;
    }
    const timeFilters = filters.filter((f) => f.ref.kind === 'time');
    const fieldFilters = filters.filter((f) => f.ref.kind !== 'time');
    const makes = fieldFilters.length > 0 || orderBy.some((k) => k.ref.kind !== 'time');
    const profile = acct.profile;
    // First the timestamps alone: which records a time filter keeps, before any is made.
    const lists = scopes.map((scope) => {
      const n = this.count(acct, resource, scope);
      const o = this.overlay.get(this.listKey(acct, resource, scope));
      const sk = scopeKey(scope);
      let entries: ReadonlyArray<number | CreatedRecord> | null = o ? this.entries(o, n) : null;
      if (timeFilters.length > 0) {
        const all = entries ?? Array.from({ length: n }, (_, i) => i);
        entries = all.filter((e) =>
          passes(timeFilters, (ref) =>
            instantOf(
              this.entryTimes(acct, resource, sk, e, o)[ref.kind === 'time' ? (ref.name as 'source_create_time' | 'source_update_time') : 'source_update_time'],
            ),
          ),
        );
      }
      return { scope, n, o, sk, entries };
    });
    const candidates = lists.reduce((sum, l) => sum + (l.entries ? l.entries.length : l.n), 0);
    if (makes && candidates > MAX_RECORDS_MADE) {
      throw new BadRequestError(
        `Filters and order_by on fields other than source_create_time and source_update_time are evaluated over at most ${MAX_RECORDS_MADE} records; this list has ${candidates}` +
          ' (after its time filters): narrow it with a source_update_time or source_create_time filter',
      );
    }
    const keyed: Array<Selected & { key: SortKey | null }> = [];
    for (let s = 0; s < lists.length; s++) {
      const { scope, n, o, sk, entries } = lists[s]!;
      const gen = this.generator(acct, resource, scope);
      const size = entries ? entries.length : n;
      for (let k = 0; k < size; k++) {
        const e = entries ? entries[k]! : k;
        let fields: Fields | null = null;
        let raw: Fields | null = null;
        const record = (): Fields => {
          if (fields) return fields;
          if (typeof e !== 'number') return (fields = e.fields);
          const base = gen(e);
          const p = o?.patches.get(e);
          return (fields = p ? { ...base, ...p.patch, id: base.id, source_update_time: p.updatedAt } : base);
        };
        const valueOf = (ref: FieldRef): unknown => {
          switch (ref.kind) {
            case 'time':
              return instantOf(fields ? fields[ref.name] : this.entryTimes(acct, resource, sk, e, o)[ref.name as 'source_create_time' | 'source_update_time']);
            case 'field':
              return record()[ref.name] ?? null;
            case 'source':
              return (raw ??= rawObject(profile, resource, record()))[ref.key] ?? null;
          }
        };
        if (fieldFilters.length > 0 && !passes(fieldFilters, valueOf)) continue;
        keyed.push({ s, e, key: orderBy.length > 0 ? sortKeyOf(orderBy, valueOf) : null });
      }
    }
    // Array#sort is stable: records the keys do not tell apart stay in the list's own order.
    if (orderBy.length > 0) keyed.sort((a, b) => compareSortKeys(orderBy, a.key!, b.key!));
    const selected: Selected[] = keyed.map(({ s, e }) => ({ s, e }));
    this.selections.set(cacheKey, { version, selected });
    if (this.selections.size > MAX_SELECTIONS) this.selections.delete(this.selections.keys().next().value!);
    return selected;
  }

  /** Every record of a small list (children, a folder's contents). */
  all(acct: DataAccount, resource: ResourceName, scope: Scope): Fields[] {
    return this.list(acct, resource, [scope], { offset: 0, limit: Number.MAX_SAFE_INTEGER }).items;
  }

  private reverseMaps(acct: DataAccount, resource: ResourceName) {
    const key = `${acct.key}|${resource}`;
    let m = this.reverse.get(key);
    if (!m) {
      m = { byId: new Map(), bySource: new Map() };
      const skew = this.opts.projectSkew;
      const n = Math.max(listSize(resource, this.opts.size, this.opts.sizes), skew?.big ?? 0, skew?.small ?? 0);
      for (let i = 0; i < n; i++) {
        m.byId.set(this.idOf(acct, resource, i), i);
        m.bySource.set(this.sourceIdOf(acct, resource, i), i);
      }
      this.reverse.set(key, m);
    }
    return m;
  }

  /** Finds a record by service id or `source_id:<x>` within one scope. */
  find(acct: DataAccount, resource: ResourceName, scope: Scope, ref: string): Ref | null {
    if (!this.supports(acct, resource)) return null;
    const bySource = ref.startsWith('source_id:');
    const key = bySource ? ref.slice('source_id:'.length) : ref;
    const o = this.overlay.get(this.listKey(acct, resource, scope));
    const maps = this.reverseMaps(acct, resource);
    const i = bySource ? maps.bySource.get(key) : maps.byId.get(key);
    if (i !== undefined && i < this.count(acct, resource, scope) && !o?.deleted.has(i)) {
      const fields = this.record(acct, resource, scope, i, o);
      return { id: String(fields.id), key: String(i), index: i, fields };
    }
    const created = o?.created.find((c) => (bySource ? c.fields.source_id === key : c.id === key));
    return created ? { id: created.id, key: `n:${created.id}`, index: null, fields: { ...created.fields } } : null;
  }

  create(acct: DataAccount, resource: ResourceName, scope: Scope, object: Fields): Fields {
    const o = this.overlay.ensure(this.listKey(acct, resource, scope));
    const n = this.overlay.next();
    const id = uuidFromKey(`${this.opts.seed}|${acct.key}|${resource}|created|${n}`);
    const now = this.overlay.tick();
    const fields: Fields = {
      id,
      source_id: typeof object.source_id === 'string' ? object.source_id : `new-${n}`,
      ...object,
      ...(scope.project ? { project_id: scope.project.id } : {}),
      source_create_time: now,
      source_update_time: now,
    };
    fields.id = id;
    o.created.push({ id, fields });
    this.overlay.changed(o);
    return { ...fields };
  }

  update(acct: DataAccount, resource: ResourceName, scope: Scope, ref: string, patch: Fields): Fields | null {
    const found = this.find(acct, resource, scope, ref);
    if (!found) return null;
    const o = this.overlay.ensure(this.listKey(acct, resource, scope));
    const clean = { ...patch };
    delete clean.id;
    delete clean.source_create_time;
    delete clean.source_update_time;
    // Strictly increasing update times, so `>` filters never miss two changes in one millisecond.
    const now = this.overlay.tick();
    if (found.index !== null) {
      const prev = o.patches.get(found.index)?.patch ?? {};
      o.patches.set(found.index, { patch: { ...prev, ...clean }, updatedAt: now });
    } else {
      const c = o.created.find((x) => x.id === found.id)!;
      Object.assign(c.fields, clean, { source_update_time: now });
    }
    this.overlay.changed(o);
    return this.find(acct, resource, scope, found.id)!.fields;
  }

  remove(acct: DataAccount, resource: ResourceName, scope: Scope, ref: string): Fields | null {
    const found = this.find(acct, resource, scope, ref);
    if (!found) return null;
    const o = this.overlay.ensure(this.listKey(acct, resource, scope));
    if (found.index !== null) {
      o.deleted.add(found.index);
      o.patches.delete(found.index);
    } else {
      o.created = o.created.filter((c) => c.id !== found.id);
    }
    this.overlay.changed(o);
    return found.fields;
  }
}
