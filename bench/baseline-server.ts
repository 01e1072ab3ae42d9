// The read API's baseline: the least a server can do to answer the same two reads from the same rows,
// raw `pg` and `node:http`, no framework, no authentication, no freshness lookup. Run as its own
// process by the benchmark: BASELINE_PORT, DATABASE_URL, BASELINE_ACCOUNT_ID, BASELINE_RESOURCE.
//   GET /<resource>/<id>                     -> the object
//   GET /<resource>?page=<n>&per_page=<n>    -> {"data":[...],"meta":{current_page,has_more_results}}
//   the same with &by=ordinal                 -> the same page as a range of the (scope, ordinal) index
//     from ordinal (page - 1) * per_page: what Postgres itself costs for a page's rows at that place.
//     Right only where the list's ordinals are 0, 1, 2, ... with no record deleted (the benchmark's
//     list after its one full pass; bench [5] checks a page of it against the OFFSET one).
import { createServer } from 'node:http';
import pg from 'pg';

const port = Number(process.env.BASELINE_PORT);
const accountId = process.env.BASELINE_ACCOUNT_ID!;
const resource = process.env.BASELINE_RESOURCE ?? 'customers';
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });

const getSql = `SELECT data::text AS j FROM records WHERE account_id = $1 AND resource = $2 AND scope = '' AND id = $3 AND deleted_at IS NULL`;
const listSql = `SELECT data::text AS j FROM records WHERE account_id = $1 AND resource = $2 AND scope = ANY($3::text[]) AND deleted_at IS NULL
                 ORDER BY scope, ordinal, id LIMIT $4 OFFSET $5`;
const rangeSql = `SELECT data::text AS j FROM records WHERE account_id = $1 AND resource = $2 AND scope = '' AND deleted_at IS NULL
                  AND ordinal >= $4 ORDER BY ordinal, id LIMIT $3`;

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const parts = url.pathname.split('/').filter(Boolean);
  const send = (status: number, body: string) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const fail = (error: unknown) => send(500, JSON.stringify({ message: String(error) }));
  if (parts[0] !== resource || parts.length > 2) return send(404, '{"message":"not found"}');
  if (parts.length === 2) {
    pool
      .query<{ j: string }>(getSql, [accountId, resource, parts[1]])
      .then((r) => (r.rows[0] ? send(200, r.rows[0].j) : send(404, '{"message":"not found"}')), fail);
    return;
  }
  const page = Math.max(1, Number(url.searchParams.get('page') ?? 1));
  const perPage = Math.min(1000, Math.max(1, Number(url.searchParams.get('per_page') ?? 100)));
  const read =
    url.searchParams.get('by') === 'ordinal'
      ? pool.query<{ j: string }>(rangeSql, [accountId, resource, perPage + 1, (page - 1) * perPage])
      : pool.query<{ j: string }>(listSql, [accountId, resource, [''], perPage + 1, (page - 1) * perPage]);
  read.then((r) => {
    const more = r.rows.length > perPage;
    const rows = (more ? r.rows.slice(0, perPage) : r.rows).map((x) => x.j);
    send(200, `{"data":[${rows.join(',')}],"meta":{"current_page":${page},"has_more_results":${more}}}`);
  }, fail);
});

server.listen(port, '127.0.0.1', () => console.log(`baseline listening on ${port}`));
const stop = () => {
  server.close();
  void pool.end().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
