// Scenario 9, "many projects": the shape of real construction and ERP accounts, where the cost of a
// pass is set by the number of scopes rather than of records. A BuildPro-like account with many
// projects (a few big, many small: sandbox `projectSkew`) with its project-scoped resources and their
// children, and an ERP-like account (GraphLedger) with thousands of AP invoices and their line items.
// For each: a full pass, an idle incremental pass, and an incremental pass after 1% of the records
// changed upstream (each change then read back through the read API). Counted per pass: upstream
// requests of the account (against the floor: the sum over its lists of ceil(records / max per_page)),
// workflow executions started, time.
import { performance } from 'node:perf_hooks';
import type { IncomingMessage, Server } from 'node:http';
import { knownProfile, perPageFor } from '../../connectors/source-systems/index.ts';
import { resourceDef } from '../../lib/resources.ts';
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
  return { projects: p, bigProjects: Math.max(1, Math.round(p / 100)), big: quick ? 100 : 200, small: 2, invoices: invoices ?? (quick ? 500 : 5_000), changeFraction: 0.01 };
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
  changed: PassFigures & { changes: number; visible: number; problems: string[] };
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
    return { requests: c.requests, refused: c.refused, workflows: await workflowsSince(env, workers.taskQueue, since), seconds, streams: result.streams, failed: result.failed.length };
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
async function changeRecords(env: MirrorEnv, account: Linked, n: number, tag: string): Promise<{ resource: string; scope: string; id: string; field: string; value: string }[]> {
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
      body: JSON.stringify({ account_token: account.accountToken, resource: r.resource, id: r.id, patch: { [field]: value }, ...(projectId ? { project_id: projectId } : {}) }),
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
    const res = await fetch(`${env.api!.url}/${c.resource}/${encodeURIComponent(c.id)}`, { headers: { ...env.mirrorHeaders(account.accountToken), ...(projectId ? { 'project-id': projectId } : {}) } });
    const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    const forwarded = [...res.headers.keys()].some((k) => k.endsWith('-warnings'));
    if (res.ok && body[c.field] === c.value && !forwarded) ok++;
    else if (problems.length < 5) problems.push(`${c.resource} ${c.id}: ${res.status} ${c.field}=${JSON.stringify(body[c.field])}${forwarded ? ' (forwarded)' : ''}`);
  }
  return { visible: ok, problems };
}

async function runAccount(env: MirrorEnv, workers: WorkerSet, system: string, label: string, o: ManyProjectsOptions, say: (line: string) => void): Promise<AccountFigures> {
  const account = await env.link(system, `bench-many-${system}`);
  say(`[9] ${label}: full pass ...`);
  const full = await pass(env, workers, account, 'full');
  const { floor, records, resources } = await floorOf(env, account, system);
  say(`[9] ${label}: ${records} records, ${full.requests} requests (floor ${floor}), ${full.workflows} workflows, ${full.seconds.toFixed(1)} s; idle incremental pass ...`);
  await env.services.pool.query('ANALYZE');
  const idle = await pass(env, workers, account, 'incremental');
  const n = Math.max(1, Math.round(records * o.changeFraction));
  say(`[9] ${label}: idle ${idle.requests} requests, ${idle.seconds.toFixed(1)} s; changing ${n} records, then an incremental pass ...`);
  const changes = await changeRecords(env, account, n, system);
  const changedPass = await pass(env, workers, account, 'incremental');
  const seen = await visible(env, account, changes);
  return { label, system, records, floor, resources, full, idle, changed: { ...changedPass, changes: changes.length, ...seen } };
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
