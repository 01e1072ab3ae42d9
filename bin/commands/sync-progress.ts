// Following a pass from the terminal: a live bar per stream (redrawn in place on a terminal, one line
// per finished stream otherwise), then the final table per resource.
import type { WorkflowHandle } from '@temporalio/client';
import type { AccountSyncSummary, SyncControl } from '../../api/sync-control.ts';
import { passTotals, streamProgress, type PassTotals, type StreamProgressRow } from '../../mirror/ops/metrics-overview.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import { clip, table } from './shared.ts';

interface FollowOptions {
  pool: Pool;
  sync: SyncControl;
  handle: WorkflowHandle;
  accountId: string;
  /** Streams whose pass began at or after this belong to the pass followed. */
  since: Date;
  out?: NodeJS.WriteStream;
  /** Redraw in place (a terminal) or print finished streams line by line. */
  live?: boolean;
  intervalMs?: number;
}

const width = 24;

/** A text bar: a share when the total is known, a moving block when it is not. */
export function textBar(done: number, total: number | null, tick: number, finished = false): string {
  if (finished) return `[${'#'.repeat(width)}]`;
  if (total === null || total <= 0) {
    const at = tick % (width - 4);
    return `[${'.'.repeat(at)}####${'.'.repeat(width - 4 - at)}]`;
  }
  const n = Math.max(0, Math.min(width, Math.round((done / total) * width)));
  return `[${'#'.repeat(n)}${'.'.repeat(width - n)}]`;
}

function streamLine(s: StreamProgressRow, tick: number): string {
  const finished = s.state === 'synced';
  const name = `${s.resource}${s.scope ? ` ${s.scope}` : ''}`;
  const count = s.expected && !finished ? `${s.records}/~${s.expected}` : String(s.records);
  const state = s.state === 'failed' ? `FAILED ${clip(s.lastError, 50)}` : s.state;
  return `  ${clip(name, 44).padEnd(44)} ${textBar(s.records, s.expected, tick, finished)} ${count.padStart(11)} rec ${String(s.pages).padStart(5)} pg  ${state}`;
}

/** Follows the pass until its workflow ends; returns its result. */
export async function followPass(o: FollowOptions): Promise<AccountSyncSummary> {
  const out = o.out ?? process.stderr;
  const live = o.live ?? Boolean(out.isTTY);
  const interval = o.intervalMs ?? (live ? 400 : 2000);
  const started = Date.now();
  let settled = false;
  const result = (o.handle.result() as Promise<AccountSyncSummary>).finally(() => {
    settled = true;
  });
  result.catch(() => undefined);
  let drawn = 0;
  let tick = 0;
  const reported = new Set<string>();
  let lastHeartbeat = 0;

  const draw = async (final: boolean) => {
    const [rows, p] = await Promise.all([
      streamProgress(o.pool, { accountId: o.accountId, since: o.since, limit: 2000 }),
      final ? undefined : o.sync.progress(o.handle),
    ]);
    const done = rows.filter((r) => r.state === 'synced').length;
    const failed = rows.filter((r) => r.state === 'failed').length;
    const records = rows.reduce((n, r) => n + r.records, 0);
    const seconds = Math.round((Date.now() - started) / 1000);
    const phase = final ? 'done' : (p?.phase ?? 'starting');
    const header = `${o.handle.workflowId}  ${phase}  streams ${done}/${Math.max(rows.length, p?.streamsTotal ?? 0)} done${failed ? `, ${failed} failed` : ''}  ${records} records  ${seconds}s`;
    if (live) {
      const rowsAvailable = Math.max(4, (out.rows || 30) - 6);
      const active = rows.filter((r) => r.state !== 'synced');
      const recent = rows.filter((r) => r.state === 'synced').slice(-Math.max(0, rowsAvailable - active.length));
      const shown = [...recent, ...active].slice(-rowsAvailable);
      const hidden = rows.length - shown.length;
      const lines = [header, ...shown.map((r) => streamLine(r, tick)), ...(hidden > 0 ? [`  … and ${hidden} more streams`] : [])];
      const columns = out.columns || 160;
      let text = drawn > 0 ? `\x1b[${drawn}A` : '';
      for (const l of lines) text += `\x1b[2K${l.slice(0, columns - 1)}\n`;
      text += '\x1b[J';
      out.write(text);
      drawn = lines.length;
    } else {
      for (const r of rows) {
        const key = `${r.resource}|${r.scope}`;
        if ((r.state === 'synced' || r.state === 'failed') && !reported.has(key)) {
          reported.add(key);
          out.write(`${streamLine(r, 0)}\n`);
        }
      }
      if (final || Date.now() - lastHeartbeat > 10_000) {
        lastHeartbeat = Date.now();
        out.write(`${header}\n`);
      }
    }
    tick++;
  };

  while (!settled) {
    await draw(false).catch(() => undefined);
    await Promise.race([
      result.then(
        () => undefined,
        () => undefined,
      ),
      new Promise((r) => setTimeout(r, interval)),
    ]);
  }
  await draw(true).catch(() => undefined);
  return result;
}

export function totalsTable(rows: PassTotals[]): string {
  const sum = (k: keyof PassTotals) => rows.reduce((n, r) => n + (r[k] as number), 0);
  const body = rows.map((r) => [
    r.resource,
    r.streams,
    r.failed || '',
    r.pages,
    r.records,
    r.inserted,
    r.updated,
    r.unchanged,
    r.deleted,
    r.seconds.toFixed(1),
  ]);
  body.push([
    'total',
    sum('streams'),
    sum('failed') || '',
    sum('pages'),
    sum('records'),
    sum('inserted'),
    sum('updated'),
    sum('unchanged'),
    sum('deleted'),
    Math.max(0, ...rows.map((r) => r.seconds)).toFixed(1),
  ]);
  return table(['resource', '>streams', '>failed', '>pages', '>records', '>inserted', '>updated', '>unchanged', '>deleted', '>seconds'], body);
}

export async function finalTotals(pool: Pool, accountId: string, since: Date): Promise<PassTotals[]> {
  return passTotals(pool, accountId, since);
}
