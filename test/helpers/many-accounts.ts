// Many accounts in mixed states (linked, idle, credentials refused, unlinked; some with failed or stalled
// streams), written straight into a mirror's database: no upstream, no Temporal. For the status page
// and `mirror status` at scale (scripts/status-200-accounts.ts, test/integration/status-many-accounts.test.ts).
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool } from '../../mirror/db/pool.ts';

const systems = [
  ['buildpro', 'BuildPro'],
  ['sqlerp', 'SQL ERP'],
  ['crmcloud', 'CRM Cloud'],
  ['fieldops', 'FieldOps'],
  ['docvault', 'DocVault'],
] as const;
const resources = ['projects', 'customers', 'vendors', 'ap-invoices', 'cost-codes', 'documents', 'photos', 'files'];
const refused = 'Upstream refused the credentials (401): Invalid Account-Token';

/** A small deterministic generator, so every run draws the same mirror. */
function random(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
}

export type AccountKind = 'refused' | 'failing' | 'stalled' | 'idle' | 'unlinked' | 'healthy';
/** 200 accounts: 12 refused, 14 with failed streams, 4 with a stalled one, 30 idle, 14 unlinked, 126 healthy. */
export const mixOf200: [AccountKind, number][] = [
  ['refused', 12],
  ['failing', 14],
  ['stalled', 4],
  ['idle', 30],
  ['unlinked', 14],
  ['healthy', 126],
];

/** Seeds accounts of each kind, in a shuffled order of linking, each with eight streams and their records. */
export async function seedAccounts(pool: Pool, mix: [AccountKind, number][] = mixOf200): Promise<void> {
  const rnd = random(42);
  const kinds = mix.flatMap(([k, n]) => Array.from({ length: n }, () => k));
  // Linked in no order of state: the page's order is its own.
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  for (const [n, kind] of kinds.entries()) {
    const id = randomUUID();
    const [slug, name] = systems[n % systems.length]!;
    const linkedDaysAgo = 30 + Math.floor(rnd() * 300);
    const status = kind === 'refused' ? 'credentials_refused' : kind === 'unlinked' ? 'unlinked' : 'linked';
    const reason = kind === 'refused' ? refused : kind === 'unlinked' ? 'unlinked through the mirror (`mirror unlink`)' : null;
    const usedDaysAgo = kind === 'idle' ? 15 + Math.floor(rnd() * 60) : rnd() * 2;
    await pool.query(
      `INSERT INTO linked_accounts (id, reference_id, source_system, source_system_name, token_ciphertext, token_hash, status, status_reason,
                                    status_changed_at, unlinked_at, created_at, updated_at, last_used_at, idle_since)
       VALUES ($1, $2, $3, $4, '\\x00', $5, $6, $7, CASE WHEN $6 <> 'linked' THEN now() - interval '3 days' END,
               CASE WHEN $6 = 'unlinked' THEN now() - interval '3 days' END, now() - make_interval(days => $8), now(),
               now() - make_interval(secs => $9), CASE WHEN $10 THEN now() - interval '1 day' END)`,
      [
        id,
        `customer-${String(n + 1).padStart(3, '0')}`,
        slug,
        name,
        randomBytes(32).toString('hex'),
        status,
        reason,
        linkedDaysAgo,
        usedDaysAgo * 86_400,
        kind === 'idle',
      ],
    );
    if (kind === 'unlinked') continue;
    const failing = kind === 'failing' ? 1 + Math.floor(rnd() * 4) : 0;
    for (const [r, resource] of resources.entries()) {
      const state = kind === 'refused' ? 'paused' : r < failing ? 'failed' : kind === 'stalled' && r === 3 ? 'stalled' : 'synced';
      const error =
        state === 'failed'
          ? `Upstream answered 502 on GET /${resource} (page ${1 + Math.floor(rnd() * 40)}): Bad Gateway`
          : state === 'stalled'
            ? `no progress: page 12 of /${resource} answered the same checkpoint 5 times`
            : null;
      const records = 5 + Math.floor(rnd() * 60);
      const freshMinutesAgo = kind === 'idle' ? 60 + rnd() * 240 : kind === 'refused' ? 4320 : state === 'synced' ? rnd() * 40 : 180 + rnd() * 600;
      await pool.query(
        `INSERT INTO streams (account_id, resource, scope, state, generation, pages, records, last_fresh_at, last_error, updated_at)
         VALUES ($1, $2, '', $3, 3, $4, $5, now() - make_interval(secs => $6), $7, now())`,
        [id, resource, state, Math.ceil(records / 50), records, freshMinutesAgo * 60, error],
      );
      await pool.query(
        `INSERT INTO records (account_id, resource, scope, id, data, hash, generation, ordinal)
         SELECT $1, $2, '', 'r' || g, '{}'::jsonb, gen_random_uuid(), 3, g FROM generate_series(1, $3) g`,
        [id, resource, records],
      );
    }
    if (kind === 'refused')
      await pool.query(`INSERT INTO account_events (account_id, event, reason) VALUES ($1, 'account.credentials_refused', $2)`, [id, refused]);
  }
}
