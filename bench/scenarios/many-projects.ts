// Scenario 9, "many projects": the shape of real construction and ERP accounts, where the cost of a
// pass is set by the number of scopes rather than of records. A BuildPro-like account with many
// projects (a few big, many small: sandbox `projectSkew`) with its project-scoped resources and their
// children, and an ERP-like account (GraphLedger) with thousands of AP invoices and their line items.
// For each: a full pass, an idle incremental pass, idle passes at simulated later times (adaptive
// polling: a project's list is asked again only once due, so time is simulated by moving the streams'
// due times back), an incremental pass after 1% of the records changed upstream (each change then read
// back through the read API, at once and after a pass a full-pass period later), and the full pass again
// under the source system's published rate limit with its windows scaled down (a minute becomes a
// second). Counted per pass: upstream requests of the account (against the floor: the sum over its
// lists of ceil(records / max per_page)), workflow executions started, time.
import { performance } from 'node:perf_hooks';
import type { IncomingMessage, Server } from 'node:http';
import { knownProfile, perPageFor } from '../../connectors/source-systems/index.ts';
import { configSchema } from '../../lib/config.ts';
import { defaultReserveRule } from '../../connectors/governor/reserve.ts';
import { allProjectsScope, resourceDef } from '../../lib/resources.ts';
import { profileOf } from '../../sandbox/source-systems/profiles.ts';
import type { BenchShared, Linked, WorkerSet } from '../lib/mirror-env.ts';
import { MirrorEnv } from '../lib/mirror-env.ts';

export interface ManyProjectsOptions {
  /** Projects of the construction account. */
  projects: number;
  /** Of them, how many are big (the first ones). */
  bigProjects: number;
  /** Records per project-scoped list of a big project, and of every other. */
  big: number;
  small: number;
  /** AP invoices of the ERP-like account (each with 3-7 line items). */
  invoices: number;
  /** Share of records changed before the last incremental pass. */
  changeFraction: number;
}

export function manyProjectsOptions(quick: boolean, projects?: number, invoices?: number): ManyProjectsOptions {
  const p = projects ?? (quick ? 50 : 500);
  return {
    projects: p,
    bigProjects: Math.max(1, Math.round(p / 100)),
    big: quick ? 100 : 200,
    small: 2,
    invoices: invoices ?? (quick ? 500 : 5_000),
    changeFraction: 0.01,
  };
}

export interface PassFigures {
  requests: number;
  /** Answers that were not 2xx (429s, errors). */
  refused: number;
  workflows: number;
  seconds: number;
  /** Streams the pass reported, and of them failed. */
  streams: number;
  failed: number;
  /** Streams left alone as not due (adaptive polling). */
  notDue: number;
}

/** The worker's polling periods (SYNC_INCREMENTAL_MINUTES, SYNC_FULL_HOURS defaults): the bench's passes run with them. */
export const benchPolling = { incrementalMinutes: 15, fullHours: 24 };
/** Idle incremental passes simulated after the first one, a period apart. */
const laterPasses = 8;

export interface LimitedPass {
  /** Requests allowed per (scaled) window. */
  limit: number;
  /** How much faster than the published rate the scaled limit is. */
  speedup: number;
  windowMs: number;
  requests: number;
  rejected: number;
  /** 429s after the pass's first window. */
  rejectedAfterFirst: number;
  seconds: number;
  /** The share of each window the sync may spend (MIRROR_SYNC_BUDGET_SHARE; the rest is the application's). */
  share: number;
  /** requests / the sync's allowed rate (share x limit per window): the time the limit alone imposes on the sync. */
  floorSeconds: number;
  failed: number;
  /** 2xx answers per window from the pass's first request on (the last window partial). */
  perWindow: number[];
  /** The longest time between two requests of the pass, and the time spent in gaps over 2 request spacings. */
  longestGapMs: number;
  gapsMs: number;
}

export interface AccountFigures {
  label: string;
  system: string;
  records: number;
  /** Sum over the account's lists of ceil(records / max per_page) (children: at least one request per parent). */
  floor: number;
  /** Resources the account's pass serves. */
  resources: number;
  full: PassFigures;
  idle: PassFigures;
  /** Idle incremental passes at simulated times, a period apart after the first. */
  later: (PassFigures & { atMinutes: number })[];
  changed: PassFigures & { changes: number; visible: number; problems: string[]; visibleAfterBound: number; problemsAfterBound: string[] };
  limited: LimitedPass;
}

/** Counts the requests of one account (by its account token) that the sandbox answers. */
function counter(server: Server, accountToken: string): { requests: number; refused: number; stop(): void } {
  const c = {
    requests: 0,
    refused: 0,
    stop: () => server.off('request', listener),
  };
  const listener = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    if (req.headers['account-token'] !== accountToken) return;
    c.requests++;
    res.once('finish', () => {
      if (res.statusCode >= 300) c.refused++;
    });
  };
  server.on('request', listener);
  return c;
}

async function workflowsSince(env: MirrorEnv, taskQueue: string, since: Date): Promise<number> {
  // Visibility is written shortly after a start: a moment's wait makes the count complete.
  await new Promise((r) => setTimeout(r, 1500));
  let n = 0;
  for await (const _ of env.shared.temporal.workflow.list({ query: `TaskQueue = '${taskQueue}' AND StartTime >= '${since.toISOString()}'` })) n++;
  return n;
}

async function pass(env: MirrorEnv, workers: WorkerSet, account: Linked, mode: 'full' | 'incremental'): Promise<PassFigures> {
  const c = counter(env.sandbox.app.server, account.accountToken);
  const since = new Date(Date.now() - 1000);
  const t0 = performance.now();
  try {
    const handle = await workers.sync.start({ accountId: account.accountId, mode });
    const result = await handle.result();
    const seconds = (performance.now() - t0) / 1000;
    c.stop();
    return {
      requests: c.requests,
      refused: c.refused,
      workflows: await workflowsSince(env, workers.taskQueue, since),
      seconds,
      streams: result.streams,
      failed: result.failed.length,
      notDue: result.notDue ?? 0,
    };
  } finally {
    c.stop();
  }
}

/** The floor of a full pass: per list, ceil(records / max per_page); a list the upstream cannot merge across projects counts per project. */
async function floorOf(env: MirrorEnv, account: Linked, system: string): Promise<{ floor: number; records: number; resources: number }> {
  const mirrorProfile = knownProfile(system)!;
  const sandboxProfile = profileOf(system)!;
  const { rows } = await env.services.pool.query<{ resource: string; scope: string; n: number }>(
    `SELECT resource, scope, count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NULL GROUP BY resource, scope`,
    [account.accountId],
  );
  const byResource = new Map<string, { scope: string; n: number }[]>();
  for (const r of rows) byResource.set(r.resource, [...(byResource.get(r.resource) ?? []), r]);
  let floor = 0;
  let records = 0;
  for (const [resource, lists] of byResource) {
    const max = perPageFor(mirrorProfile, resource);
    const def = resourceDef(resource)!;
    const support = sandboxProfile.resources[resource as keyof typeof sandboxProfile.resources];
    const total = lists.reduce((a, l) => a + l.n, 0);
    records += total;
    if (def.scope === 'child' || (support?.scope === 'project' && support.crossProject === false)) {
      // One list per parent (or project): each costs a request, even a short one.
      floor += lists.reduce((a, l) => a + Math.max(1, Math.ceil(l.n / max)), 0);
    } else {
      floor += Math.max(1, Math.ceil(total / max));
    }
  }
  // Parents without children still cost their request.
  for (const child of Object.keys(sandboxProfile.resources)) {
    const def = resourceDef(child);
    if (def?.scope !== 'child') continue;
    const { rows: empty } = await env.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM records p WHERE p.account_id = $1 AND p.resource = $2 AND p.deleted_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM records c WHERE c.account_id = p.account_id AND c.resource = $3 AND c.scope LIKE '%' || p.resource || '=' || p.id)`,
      [account.accountId, def.parent, child],
    );
    floor += empty[0]!.n;
  }
  return { floor, records, resources: Object.keys(mirrorProfile.resources).length };
}

const changeField = (resource: string): string => {
  const fields = resourceDef(resource)!.fields;
  return fields.includes('name') ? 'name' : fields.includes('description') ? 'description' : 'status';
};

/** Changes `n` random top-level records through the sandbox's admin API; returns what was changed. */
async function changeRecords(
  env: MirrorEnv,
  account: Linked,
  n: number,
  tag: string,
): Promise<{ resource: string; scope: string; id: string; field: string; value: string }[]> {
  const { rows } = await env.services.pool.query<{ resource: string; scope: string; id: string }>(
    `SELECT resource, scope, id FROM records WHERE account_id = $1 AND deleted_at IS NULL AND resource <> 'projects'
        AND resource NOT IN ('ap-invoice-line-items', 'file-versions', 'drawing-versions') ORDER BY random() LIMIT $2`,
    [account.accountId, n],
  );
  const changes = [];
  for (const [i, r] of rows.entries()) {
    const field = changeField(r.resource);
    const value = `changed ${tag} ${i}`;
    const projectId = r.scope.startsWith('project=') ? r.scope.slice('project='.length).split('/')[0] : undefined;
    const res = await fetch(`${env.sandbox.url}/_admin/objects`, {
      method: 'PATCH',
      headers: { ...env.upstreamHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({
        account_token: account.accountToken,
        resource: r.resource,
        id: r.id,
        patch: { [field]: value },
        ...(projectId ? { project_id: projectId } : {}),
      }),
    });
    if (!res.ok) throw new Error(`patching ${r.resource} ${r.id} failed: ${res.status} ${await res.text()}`);
    changes.push({ ...r, field, value });
  }
  return changes;
}

/** Reads each change back through the mirror's read API (and not forwarded: the scope is synced). */
async function visible(env: MirrorEnv, account: Linked, changes: Awaited<ReturnType<typeof changeRecords>>): Promise<{ visible: number; problems: string[] }> {
  let ok = 0;
  const problems: string[] = [];
  for (const c of changes) {
    const projectId = c.scope.startsWith('project=') ? c.scope.slice('project='.length).split('/')[0] : undefined;
    const res = await fetch(`${env.api!.url}/${c.resource}/${encodeURIComponent(c.id)}`, {
      headers: { ...env.mirrorHeaders(account.accountToken), ...(projectId ? { 'project-id': projectId } : {}) },
    });
    const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    const forwarded = [...res.headers.keys()].some((k) => k.endsWith('-warnings'));
    if (res.ok && body[c.field] === c.value && !forwarded) ok++;
    else if (problems.length < 5)
      problems.push(`${c.resource} ${c.id}: ${res.status} ${c.field}=${JSON.stringify(body[c.field])}${forwarded ? ' (forwarded)' : ''}`);
  }
  return { visible: ok, problems };
}

/**
 * As if `ms` had passed for adaptive polling: the account's streams' due times move back by it, and so
 * do project lists' last polls (a list is listed regardless once its last poll is a full-pass period
 * old). Other streams' last passes stay: they set the update filter (`since`) of their next pass.
 */
async function elapse(env: MirrorEnv, account: Linked, ms: number): Promise<void> {
  await env.services.pool.query(
    `UPDATE streams SET next_due_at = next_due_at - make_interval(secs => $2),
            last_pass_started_at = CASE WHEN scope LIKE 'project=%' AND scope <> $3 AND position('/' in scope) = 0 THEN last_pass_started_at - make_interval(secs => $2) ELSE last_pass_started_at END
      WHERE account_id = $1`,
    [account.accountId, ms / 1000, allProjectsScope],
  );
}

/**
 * A full pass under the source system's rate limit, in time scaled down as scenario 4 does: the
 * published rate sped up so that the pass is bound by it (half the rate of the unlimited full pass,
 * the pass lasting at most about 75 s), in windows of a twelfth of the pass at least (so the pass spans
 * a dozen windows: the first teaches the governor the limit, the others show it kept). The sandbox
 * enforces the limit and reports it in its headers, which is all the governor learns it from.
 */
async function limitedFullPass(env: MirrorEnv, workers: WorkerSet, account: Linked, system: string, unlimited: PassFigures): Promise<LimitedPass> {
  const published = profileOf(system)!.rateLimit;
  // The sync may spend only this share of each window (the rest is the application's): the
  // time the limit imposes is judged against it, as scenario 4 does.
  // By default all but the application's reserve, at its floor here (no application calls).
  const share =
    configSchema.shape.MIRROR_SYNC_BUDGET_SHARE.parse(env.childEnv(workers.taskQueue).MIRROR_SYNC_BUDGET_SHARE ?? process.env.MIRROR_SYNC_BUDGET_SHARE) ??
    1 - defaultReserveRule.floor;
  const rate = Math.max((0.5 * unlimited.requests) / unlimited.seconds, unlimited.requests / 75);
  const limit = Math.max(5, Math.round(unlimited.requests / 12));
  const windowMs = Math.round((limit / rate) * 1000);
  const speedup = rate / (published.limit / (published.windowMs / 1000));
  const admin = (body: unknown) =>
    fetch(`${env.sandbox.url}/_admin/rate-limits`, {
      method: 'PUT',
      headers: { ...env.upstreamHeaders, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => {
      if (!r.ok) throw new Error(`setting the sandbox's rate limits failed: ${r.status} ${await r.text()}`);
    });
  await admin({ enabled: true, windowMs, accountLimit: 1_000_000, sourceSystemLimits: { [system]: limit }, reset: true });
  const seen: { t: number; status: number }[] = [];
  const listener = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    if (req.headers['account-token'] !== account.accountToken) return;
    const t = performance.now();
    res.once('finish', () => seen.push({ t, status: res.statusCode }));
  };
  env.sandbox.app.server.on('request', listener);
  const t0 = performance.now();
  try {
    const result = await (await workers.sync.start({ accountId: account.accountId, mode: 'full' })).result();
    const seconds = (performance.now() - t0) / 1000;
    const first = Math.min(...seen.map((s) => s.t));
    const rejected = seen.filter((s) => s.status === 429);
    const ok = seen.filter((s) => s.status !== 429).map((s) => s.t - first);
    const perWindow: number[] = [];
    for (const t of ok) perWindow[Math.floor(t / windowMs)] = (perWindow[Math.floor(t / windowMs)] ?? 0) + 1;
    const starts = seen.map((s) => s.t).sort((a, b) => a - b);
    const spacing = windowMs / (share * limit);
    let longestGapMs = 0;
    let gapsMs = 0;
    for (let i = 1; i < starts.length; i++) {
      const gap = starts[i]! - starts[i - 1]!;
      longestGapMs = Math.max(longestGapMs, gap);
      if (gap > 2 * spacing) gapsMs += gap - spacing;
    }
    return {
      limit,
      speedup,
      windowMs,
      requests: seen.length,
      rejected: rejected.length,
      rejectedAfterFirst: rejected.filter((s) => s.t >= first + windowMs).length,
      seconds,
      share,
      floorSeconds: (seen.length - rejected.length) / ((share * limit) / (windowMs / 1000)),
      failed: result.failed.length,
      perWindow: Array.from(perWindow, (n) => n ?? 0),
      longestGapMs,
      gapsMs,
    };
  } finally {
    env.sandbox.app.server.off('request', listener);
    await admin({ enabled: false });
  }
}

async function runAccount(
  env: MirrorEnv,
  workers: WorkerSet,
  system: string,
  label: string,
  o: ManyProjectsOptions,
  say: (line: string) => void,
): Promise<AccountFigures> {
  const account = await env.link(system, `bench-many-${system}`);
  say(`[9] ${label}: full pass ...`);
  const full = await pass(env, workers, account, 'full');
  const { floor, records, resources } = await floorOf(env, account, system);
  say(
    `[9] ${label}: ${records} records, ${full.requests} requests (floor ${floor}), ${full.workflows} workflows, ${full.seconds.toFixed(1)} s; idle incremental pass ...`,
  );
  await env.services.pool.query('ANALYZE');
  const idle = await pass(env, workers, account, 'incremental');
  say(
    `[9] ${label}: idle ${idle.requests} requests, ${idle.notDue} streams not due, ${idle.seconds.toFixed(1)} s; ${laterPasses} idle passes at simulated times ${benchPolling.incrementalMinutes} min apart ...`,
  );
  const period = benchPolling.incrementalMinutes * 60_000;
  const later: AccountFigures['later'] = [];
  for (let i = 1; i <= laterPasses; i++) {
    await elapse(env, account, period);
    later.push({ atMinutes: i * benchPolling.incrementalMinutes, ...(await pass(env, workers, account, 'incremental')) });
  }
  const n = Math.max(1, Math.round(records * o.changeFraction));
  say(`[9] ${label}: later passes ${later.map((l) => l.requests).join(', ')} requests; changing ${n} records, then an incremental pass ...`);
  const changes = await changeRecords(env, account, n, system);
  const changedPass = await pass(env, workers, account, 'incremental');
  const seen = await visible(env, account, changes);
  // Changes in lists not due yet are seen once they are: at the latest a full-pass period later.
  await elapse(env, account, benchPolling.fullHours * 3_600_000);
  await pass(env, workers, account, 'incremental');
  const eventually = await visible(env, account, changes);
  say(
    `[9] ${label}: ${seen.visible}/${changes.length} changes visible at once, ${eventually.visible} a full-pass period later; the full pass under the rate limit ...`,
  );
  const limited = await limitedFullPass(env, workers, account, system, full);
  return {
    label,
    system,
    records,
    floor,
    resources,
    full,
    idle,
    later,
    changed: { ...changedPass, changes: changes.length, ...seen, visibleAfterBound: eventually.visible, problemsAfterBound: eventually.problems },
    limited,
  };
}

export async function manyProjects(shared: BenchShared, o: ManyProjectsOptions, say: (line: string) => void): Promise<AccountFigures[]> {
  const env = await MirrorEnv.start(shared, {
    name: 'many',
    sandbox: {
      // Both accounts in one sandbox: the construction account's projects, the ERP account's invoices.
      sizes: { projects: o.projects, 'ap-invoices': o.invoices, vendors: 50, customers: 50 },
      projectSkew: { bigProjects: o.bigProjects, big: o.big, small: o.small },
    },
    assumeLimits: false,
    api: true,
  });
  try {
    const workers = await env.startWorkers(1);
    return [
      await runAccount(env, workers, 'buildpro', `BuildPro-like, ${o.projects} projects`, o, say),
      await runAccount(env, workers, 'graphledger', `ERP-like (GraphLedger), ${o.invoices} AP invoices`, o, say),
    ];
  } finally {
    await env.close();
  }
}
