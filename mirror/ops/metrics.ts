// Metrics derived from Postgres at scrape time: what every worker process wrote (streams, sync_runs),
// the shared rate budgets, the inbox and outbound deliveries. Postgres already holds these for the
// whole cluster, so any one API process can export them, however many workers there are.
import type { Pool } from '../db/pool.ts';

interface Sample {
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  help: string;
  samples: Sample[];
}

/** Seconds; receipt of a webhook event to its application. */
const webhookLatencyBuckets: readonly number[] = [0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

/** Every family read from Postgres, in the order /metrics lists them: each concern's queries run at once. */
export async function databaseMetrics(pool: Pool): Promise<Family[]> {
  const parts = await Promise.all([
    recordFamilies(pool),
    streamFamilies(pool),
    budgetFamilies(pool),
    inboxFamilies(pool),
    accountFamilies(pool),
    deliveryFamilies(pool),
  ]);
  return parts.flat();
}

/** Live records, and what sync passes wrote (records by kind, pages). */
async function recordFamilies(pool: Pool): Promise<Family[]> {
  const [records, written] = await Promise.all([
    pool.query<{ source_system: string; resource: string; n: number }>(
      `SELECT a.source_system, r.resource, count(*)::int AS n
         FROM records r JOIN linked_accounts a ON a.id = r.account_id
        WHERE r.deleted_at IS NULL GROUP BY a.source_system, r.resource ORDER BY a.source_system, r.resource`,
    ),
    // Finished runs carry their counts; a running pass's counts live in its stream's checkpoint.
    pool.query<{ source_system: string; resource: string; pages: number; inserted: number; updated: number; unchanged: number; deleted: number }>(
      `SELECT a.source_system, s.resource,
              sum(CASE WHEN r.status = 'running' THEN s.pages ELSE r.pages END)::float8 AS pages,
              sum(CASE WHEN r.status = 'running' THEN coalesce((s.checkpoint->'counts'->>'inserted')::int, 0) ELSE r.inserted END)::float8 AS inserted,
              sum(CASE WHEN r.status = 'running' THEN coalesce((s.checkpoint->'counts'->>'updated')::int, 0) ELSE r.updated END)::float8 AS updated,
              sum(CASE WHEN r.status = 'running' THEN coalesce((s.checkpoint->'counts'->>'unchanged')::int, 0) ELSE r.unchanged END)::float8 AS unchanged,
              sum(r.deleted)::float8 AS deleted
         FROM sync_runs r JOIN streams s ON s.id = r.stream_id AND (r.status <> 'running' OR r.generation = s.generation)
         JOIN linked_accounts a ON a.id = s.account_id
        GROUP BY a.source_system, s.resource ORDER BY a.source_system, s.resource`,
    ),
  ]);
  return [
    {
      name: 'mirror_records',
      type: 'gauge',
      help: 'Live (not deleted) mirrored records.',
      samples: records.rows.map((r) => ({ labels: { source_system: r.source_system, resource: r.resource }, value: r.n })),
    },
    {
      name: 'mirror_records_written_total',
      type: 'counter',
      help: 'Records written by sync passes, by kind (unchanged ones are compared, not rewritten).',
      samples: written.rows.flatMap((r) =>
        (['inserted', 'updated', 'deleted', 'unchanged'] as const).map((kind) => ({
          labels: { source_system: r.source_system, resource: r.resource, kind },
          value: r[kind],
        })),
      ),
    },
    {
      name: 'mirror_pages_total',
      type: 'counter',
      help: 'Upstream pages written by sync passes.',
      samples: written.rows.map((r) => ({ labels: { source_system: r.source_system, resource: r.resource }, value: r.pages })),
    },
  ];
}

/** Streams by state, each account's stalest stream per resource, and passes by outcome. */
async function streamFamilies(pool: Pool): Promise<Family[]> {
  const [streams, lag, runs] = await Promise.all([
    pool.query<{ source_system: string; state: string; n: number }>(
      `SELECT a.source_system, s.state, count(*)::int AS n FROM streams s JOIN linked_accounts a ON a.id = s.account_id GROUP BY a.source_system, s.state ORDER BY a.source_system, s.state`,
    ),
    pool.query<{ account_id: string; source_system: string; resource: string; lag: number }>(
      `SELECT s.account_id, a.source_system, s.resource, extract(epoch FROM now() - min(s.last_fresh_at))::float8 AS lag
         FROM streams s JOIN linked_accounts a ON a.id = s.account_id
        WHERE s.last_fresh_at IS NOT NULL AND a.status = 'linked'
        GROUP BY s.account_id, a.source_system, s.resource ORDER BY s.account_id, s.resource`,
    ),
    pool.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM sync_runs GROUP BY status ORDER BY status`),
  ]);
  return [
    {
      name: 'mirror_streams',
      type: 'gauge',
      help: 'Streams (account, resource, scope) by state.',
      samples: streams.rows.map((r) => ({ labels: { source_system: r.source_system, state: r.state }, value: r.n })),
    },
    {
      name: 'mirror_streams_stalled',
      type: 'gauge',
      help: 'Streams whose pass is stalled: its checkpoint did not move attempt after attempt (the same page again, or no answer); each is tried again after a backoff.',
      samples: streams.rows.filter((r) => r.state === 'stalled').map((r) => ({ labels: { source_system: r.source_system }, value: r.n })),
    },
    {
      name: 'mirror_stream_lag_seconds',
      type: 'gauge',
      help: "Seconds since the stalest stream of an account's resource was last brought up to date.",
      samples: lag.rows.map((r) => ({
        labels: { account: r.account_id, source_system: r.source_system, resource: r.resource },
        value: Math.round(r.lag * 1000) / 1000,
      })),
    },
    {
      name: 'mirror_sync_runs_total',
      type: 'counter',
      help: 'Stream passes by outcome.',
      samples: runs.rows.map((r) => ({ labels: { status: r.status }, value: r.n })),
    },
  ];
}

/** A rate budget's labels from its key: service or source system, its account, and its lane. */
function budgetLabels(key: string): Record<string, string> {
  // `|background` names a budget's sync lane: the schedule that keeps background work to its share.
  const lane = key.endsWith('|background') ? 'sync' : 'all';
  const parts = key.replace(/\|background$/, '').split(':');
  return parts[0] === 'source'
    ? { kind: 'source_system', account: parts[1] ?? '', source_system: parts[2] ?? '', lane }
    : { kind: 'service', account: parts[2] ?? '', source_system: '', lane };
}

/** The shared rate budgets: each window's size, what is left of it, and how long it is blocked. */
async function budgetFamilies(pool: Pool): Promise<Family[]> {
  const budgets = await pool.query<{ key: string; total: number | null; remaining: number | null; resets_in: number | null; blocked_for: number | null }>(
    `SELECT key, total, remaining,
            extract(epoch FROM resets_at - clock_timestamp())::float8 AS resets_in,
            greatest(0, extract(epoch FROM blocked_until - clock_timestamp()))::float8 AS blocked_for
       FROM rate_budgets ORDER BY key`,
  );
  return [
    {
      name: 'mirror_governor_budget_total',
      type: 'gauge',
      help: 'Requests a rate window allows, as the upstream last reported (or first guessed).',
      samples: budgets.rows.filter((r) => r.total !== null).map((r) => ({ labels: { budget: r.key, ...budgetLabels(r.key) }, value: r.total! })),
    },
    {
      name: 'mirror_governor_budget_remaining',
      type: 'gauge',
      help: 'Requests left in a rate window, as the upstream last reported (the whole budget once the window reset).',
      samples: budgets.rows
        .filter((r) => r.remaining !== null || r.total !== null)
        // A window whose reported reset has passed has its whole budget again.
        .map((r) => ({
          labels: { budget: r.key, ...budgetLabels(r.key) },
          value: r.remaining !== null && (r.resets_in === null || r.resets_in > 0) ? r.remaining : (r.total ?? r.remaining!),
        })),
    },
    {
      name: 'mirror_governor_blocked_seconds',
      type: 'gauge',
      help: 'Seconds until a spent (or 429-answered) rate window lets requests through again.',
      samples: budgets.rows.map((r) => ({ labels: { budget: r.key, ...budgetLabels(r.key) }, value: Math.round((r.blocked_for ?? 0) * 1000) / 1000 })),
    },
  ];
}

/** The upstream's webhook events: the inbox's backlog and its oldest, events received, and receipt-to-application latency. */
async function inboxFamilies(pool: Pool): Promise<Family[]> {
  const [inbox, latency] = await Promise.all([
    pool.query<{ pending: number; oldest: number | null; received: number }>(
      `SELECT count(*) FILTER (WHERE applied_at IS NULL)::int AS pending,
              extract(epoch FROM now() - min(received_at) FILTER (WHERE applied_at IS NULL))::float8 AS oldest,
              count(*)::int AS received
         FROM inbox_events`,
    ),
    pool.query<Record<string, number>>(
      `SELECT ${webhookLatencyBuckets.map((b, i) => `count(*) FILTER (WHERE applied_at - received_at <= make_interval(secs => ${b}))::int AS b${i}`).join(', ')},
              count(*)::int AS n, coalesce(sum(extract(epoch FROM applied_at - received_at)), 0)::float8 AS total
         FROM inbox_events WHERE applied_at IS NOT NULL`,
    ),
  ]);
  const lat = latency.rows[0] ?? {};
  return [
    {
      name: 'mirror_inbox_backlog',
      type: 'gauge',
      help: 'Upstream webhook events received and not yet applied.',
      samples: [{ labels: {}, value: inbox.rows[0]?.pending ?? 0 }],
    },
    {
      name: 'mirror_inbox_oldest_pending_seconds',
      type: 'gauge',
      help: 'Age of the oldest unapplied webhook event (0 when none waits).',
      samples: [{ labels: {}, value: Math.round((inbox.rows[0]?.oldest ?? 0) * 1000) / 1000 }],
    },
    {
      name: 'mirror_webhook_events_received_total',
      type: 'counter',
      help: 'Distinct upstream webhook events stored in the inbox.',
      samples: [{ labels: {}, value: inbox.rows[0]?.received ?? 0 }],
    },
    {
      name: 'mirror_webhook_apply_latency_seconds',
      type: 'histogram',
      help: 'Receipt of an upstream webhook event to its application to the mirror.',
      samples: [
        ...webhookLatencyBuckets.map((b, i) => ({ labels: { le: String(b) }, value: lat[`b${i}`] ?? 0 })),
        { labels: { le: '+Inf' }, value: lat.n ?? 0 },
        // Sum and count complete the histogram (rendered after the buckets).
        { labels: { __suffix: '_sum' }, value: lat.total ?? 0 },
        { labels: { __suffix: '_count' }, value: lat.n ?? 0 },
      ],
    },
  ];
}

/** Linked accounts by status, and the changes of their status. */
async function accountFamilies(pool: Pool): Promise<Family[]> {
  const [statuses, events] = await Promise.all([
    pool.query<{ status: string; n: number }>(
      `SELECT CASE WHEN status = 'linked' AND idle_since IS NOT NULL THEN 'idle' ELSE status END AS status, count(*)::int AS n FROM linked_accounts GROUP BY 1 ORDER BY 1`,
    ),
    pool.query<{ event: string; n: number }>(`SELECT event, count(*)::float8 AS n FROM account_events GROUP BY event ORDER BY event`),
  ]);
  return [
    {
      name: 'mirror_accounts',
      type: 'gauge',
      help: 'Linked accounts by status (linked, idle: unused for MIRROR_IDLE_AFTER and polled less often, credentials_refused: the upstream refuses its token, unlinked).',
      samples: statuses.rows.map((r) => ({ labels: { status: r.status }, value: r.n })),
    },
    {
      name: 'mirror_account_events_total',
      type: 'counter',
      help: "Changes of accounts' status and of their streams' stalls, by event (account.credentials_refused, account.relinked, account.unlinked, stream.stalled, stream.recovered).",
      samples: events.rows.map((r) => ({ labels: { event: r.event }, value: r.n })),
    },
  ];
}

/** Deliveries to subscribers' webhooks: delivered, failed, and subscriptions failing now. */
async function deliveryFamilies(pool: Pool): Promise<Family[]> {
  const subs = await pool.query<{ type: string; delivered: number; failures: number; failing: number; n: number }>(
    `SELECT type, sum(delivered)::float8 AS delivered, sum(failures)::float8 AS failures,
            count(*) FILTER (WHERE last_error IS NOT NULL)::int AS failing, count(*)::int AS n
       FROM subscriptions GROUP BY type ORDER BY type`,
  );
  return [
    {
      name: 'mirror_outbound_deliveries_total',
      type: 'counter',
      help: "Changes delivered to subscribers' webhooks.",
      samples: subs.rows.map((r) => ({ labels: { type: r.type }, value: r.delivered })),
    },
    {
      name: 'mirror_outbound_delivery_failures_total',
      type: 'counter',
      help: "Failed deliveries to subscribers' webhooks (each is retried).",
      samples: subs.rows.map((r) => ({ labels: { type: r.type }, value: r.failures })),
    },
    {
      name: 'mirror_outbound_subscriptions_failing',
      type: 'gauge',
      help: 'Subscriptions whose last delivery failed.',
      samples: subs.rows.map((r) => ({ labels: { type: r.type }, value: r.failing })),
    },
  ];
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** The Prometheus text exposition format (0.0.4) of some families. */
export function renderFamilies(families: readonly Family[]): string {
  const out: string[] = [];
  for (const f of families) {
    out.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const { __suffix, ...labels } = s.labels;
      const name = f.name + (__suffix ?? (f.type === 'histogram' ? '_bucket' : ''));
      const entries = Object.entries(labels);
      const text = entries.length ? `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}` : '';
      out.push(`${name}${text} ${formatValue(s.value)}`);
    }
  }
  return out.join('\n') + '\n';
}
