// The sync activities' dependencies and the shapes of their inputs and results (the workflows
// import them as types; activities/sync.ts re-exports them).
import type { AccountCredentials } from '../connectors/credentials.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import type { Logger } from '../lib/logger.ts';
import type { ScopeKind } from '../lib/resources.ts';
import type { AccountStore } from '../mirror/control/accounts.ts';
import type { Pool } from '../mirror/db/pool.ts';
import type { PollingPolicy } from '../mirror/streams/polling.ts';
import type { PassMode } from '../mirror/streams/streams.ts';
import type { SliceCounts } from './sync-slice.ts';
import type { StallPolicy } from '../mirror/streams/stalls.ts';

export interface SyncDeps {
  upstream: UpstreamClient;
  pool: Pool;
  accounts: AccountStore;
  logger: Logger;
  /** Most pages one pass of a stream may take (SYNC_MAX_PAGES_PER_PASS); default {@link defaultMaxPagesPerPass}. */
  maxPagesPerPass?: number;
  /** The incremental and full passes' periods (SYNC_INCREMENTAL_MINUTES, SYNC_FULL_HOURS): adaptive polling's bounds. */
  polling?: PollingPolicy;
  /** Judges a 401: the account's credentials refused (confirmed by a cheap call), or one list's own refusal. */
  credentials?: AccountCredentials;
  /** When a stream whose checkpoint does not move is stalled, and its backoff (MIRROR_STALL_*); defaults otherwise. */
  stalls?: StallPolicy;
  /**
   * Whether writes record their account's position (mirror/db/write-positions.ts): with read replicas,
   * the account's reads then go only to a replica that has replayed what a pass or an event changed.
   */
  recordWritePositions?: boolean;
}

export interface PlannedResource {
  name: string;
  /** Where it lives in this account's source system. */
  scope: ScopeKind;
  /**
   * Project-scoped resources: false where the source system is known not to list it across projects
   * (`Project-Id: *`: its profile says so, or it refused before); otherwise the pass tries it.
   */
  crossProject?: boolean;
}

export interface SyncChildrenInput {
  accountId: string;
  /** The child resource, e.g. `ap-invoice-line-items`. */
  resource: string;
  parentResource: string;
  /** Scope of the parents (`''` or `project=<id>`). */
  parentScope: string;
  parentIds: string[];
  projectId?: string;
  passKey: string;
  mode: PassMode;
  concurrency?: number;
}

/** What a batch of parents' children did: counts, the streams that failed for good, and those that are stalled (why). */
export interface SyncChildrenResult extends SliceCounts {
  failed: { scope: string; error: string }[];
  /** Absent from batches recorded before it was reported. */
  stalled?: { scope: string; reason: string }[];
}

export interface AccountPlan {
  sourceSystem: string;
  /** Resources this account's source system serves, in dependency order. */
  resources: PlannedResource[];
}

export interface ParentScopesInput {
  accountId: string;
  /** The parent resource whose live records give the child streams' scopes. */
  parentResource: string;
  parentScope: string;
  /** Only parents whose children of this resource are due again (an incremental pass; see `parentsToRefresh`). */
  changedFor?: string;
  /** With `changedFor`: the pass asking (parents it already visited stay in the list). */
  passKey?: string;
}

/** One small stream of a sweep: a project's list, or a parent's children. */
export interface SweepItem {
  resource: string;
  scope: string;
  path: string;
  projectId?: string;
}

export interface SweepInput {
  accountId: string;
  passKey: string;
  mode: PassMode;
  items: SweepItem[];
  /** Streams synced at once (default 4). */
  concurrency?: number;
  /**
   * An account's scheduled incremental pass: streams not due (mirror/streams/polling.ts) are skipped, asking
   * the upstream nothing. Targeted passes list what they name.
   */
  adaptive?: boolean;
}

export interface SweepResult extends SliceCounts {
  streams: number;
  /** Of them, streams skipped as not due (an adaptive pass). */
  notDue: number;
  /** Streams that failed for good (the others went on). */
  failed: { resource: string; scope: string; error: string }[];
  /** Streams that are stalled, and why (not failed: tried again after their backoff). Absent from sweeps recorded before it was reported. */
  stalled?: { resource: string; scope: string; reason: string }[];
}

/** The children streams of a parent resource in some parent scopes, as a pass plans them. */
export interface ChildrenPlanInput {
  accountId: string;
  parentResource: string;
  parentScopes: string[];
  childResource: string;
  /** Only parents whose children are due again (an incremental pass); else every live parent. */
  changedOnly: boolean;
  /** A scope with more parents than this is left to a workflow of its own (it only names it). */
  inlineMax: number;
}

export interface ChildrenPlan {
  /** Per parent scope, the parents whose children to list. */
  inline: Record<string, string[]>;
  /** Parent scopes with more than `inlineMax` such parents. */
  big: string[];
}
