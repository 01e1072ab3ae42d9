// Scenario 11's baseline: the least a server can do to answer a source_data filter and a grouped
// aggregate over the mirrored customers, as a developer would write them by hand in raw SQL on the
// same `records` table, through `pg` and `node:http` (no framework, no authentication, no freshness
// lookup). Run as its own process by the benchmark: BASELINE_PORT, DATABASE_URL, BASELINE_ACCOUNT_ID,
// BASELINE_SOURCE_WRAPPED.
//   GET /filter?key=<source key>&value=<text>   -> page 1 (100) of the customers whose source object's key has that text
//   GET /aggregate                              -> count and sum of balance per status
import { createServer } from 'node:http';
import pg from 'pg';

const port = Number(process.env.BASELINE_PORT);
const accountId = process.env.BASELINE_ACCOUNT_ID!;
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
// The source object itself, or inside the wrapper {path, content_type, data} (the bench says which).
const source = process.env.BASELINE_SOURCE_WRAPPED === '1' ? `source_data->'data'` : 'source_data';

const filterSql = `SELECT data::text AS j FROM records
                    WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND deleted_at IS NULL AND ${source}->>$2 = $3
                    ORDER BY scope, ordinal, id LIMIT 101`;
const aggregateSql = `SELECT data->'status' AS g, count(*)::int AS n, sum((data->>'balance')::numeric)::float8 AS s FROM records
                       WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL
                       GROUP BY 1 ORDER BY 1`;

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const send = (status: number, body: string) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const fail = (error: unknown) => send(500, JSON.stringify({ message: String(error) }));
  if (url.pathname === '/filter') {
    pool.query<{ j: string }>(filterSql, [accountId, url.searchParams.get('key') ?? '', url.searchParams.get('value') ?? '']).then((r) => {
      const more = r.rows.length > 100;
      const rows = (more ? r.rows.slice(0, 100) : r.rows).map((x) => x.j);
      send(200, `{"data":[${rows.join(',')}],"meta":{"current_page":1,"has_more_results":${more}}}`);
    }, fail);
    return;
  }
  if (url.pathname === '/aggregate') {
    pool
      .query<{ g: unknown; n: number; s: number | null }>(aggregateSql, [accountId])
      .then((r) => send(200, JSON.stringify({ data: r.rows.map((x) => ({ group: x.g, count: x.n, sum: { balance: x.s } })) })), fail);
    return;
  }
  send(404, '{"message":"not found"}');
});

server.listen(port, '127.0.0.1', () => console.log(`filters baseline listening on ${port}`));
const stop = () => {
  server.close();
  void pool.end().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
