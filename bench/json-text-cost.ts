// What serving the upstream's own JSON text would cost, against today's jsonb: the bytes stored, the
// write speed of a page, filter and aggregate speed, and the read speed of a page, measured side by
// side on one dataset (the sandbox's customers with their source data, as the upstream sends them).
// Three stores of the same records: `jsonb` (today: keys in jsonb's order, a space after every `:`
// and `,` when it is printed), `json` (the upstream's text as it came; Postgres parses it again at
// every field it reads) and `both` (jsonb for filters, and the upstream's text beside it for reads).
// Read variants also include jsonb with its text made compact (and source_data put last, as the
// upstream puts it) by the reader, the only alternatives to the upstream's text that keep jsonb.
//
//   node --import tsx bench/json-text-cost.ts [--records 100000] [--pages 3000]
//
// It makes (and drops at the end) its own database next to DATABASE_URL's.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startSandbox } from '../sandbox/server.ts';

const { values } = parseArgs({ options: { records: { type: 'string', default: '100000' }, pages: { type: 'string', default: '3000' } } });
const recordCount = Number(values.records);
const readPages = Number(values.pages);
const perPage = 100;
const writePage = 1000;

const baseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/mirror';
const dbName = `json_text_cost_${process.pid}`;

/** jsonb's printed text made compact: the space after each `:` and `,` outside strings dropped. */
export function compactJsonbText(s: string): string {
  let out = '';
  let from = 0;
  let i = 0;
  const n = s.length;
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c === 34) {
      // A string: on to its closing quote (one not escaped by an odd run of backslashes).
      for (;;) {
        const q = s.indexOf('"', i + 1);
        let b = q - 1;
        while (s.charCodeAt(b) === 92) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
      i++;
    } else if ((c === 58 || c === 44) && s.charCodeAt(i + 1) === 32) {
      out += s.slice(from, i + 1);
      i += 2;
      from = i;
    } else i++;
  }
  return from === 0 ? s : out + s.slice(from);
}

interface Rec {
  id: string;
  data: string;
  sourceData: string;
}

async function dataset(): Promise<Rec[]> {
  const clientId = '00000000-0000-4000-8000-000000000001';
  const clientSecret = 'S'.repeat(40);
  const sb = await startSandbox({ port: 0, seed: 7, clientId, clientSecret, logger: false, rateLimits: false, sizes: { customers: recordCount } });
  try {
    const base = { 'api-version': '2021-11-21', 'client-id': clientId, 'client-secret': clientSecret, 'content-type': 'application/json' };
    const post = async (path: string, body: unknown) =>
      (await (await fetch(`${sb.url}${path}`, { method: 'POST', headers: base, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const { link_token } = await post('/link/token/create', { reference_id: 'json-text-cost' });
    const { public_token } = await post('/_admin/link/public-token', { link_token, source_system: 'crmcloud' });
    const { account_token } = await post('/link/token/exchange', { public_token });
    const out: Rec[] = [];
    for (let page = 1; out.length < recordCount; page++) {
      const res = await fetch(`${sb.url}/customers?page=${page}&per_page=1000`, {
        headers: { ...base, 'account-token': account_token!, 'include-source-data': 'true' },
      });
      const body = (await res.json()) as { data: Record<string, unknown>[]; meta: { has_more_results: boolean | null } };
      for (const r of body.data) {
        // The sandbox writes JSON.stringify's text: the same call gives back each record's upstream text.
        const { source_data, ...rest } = r;
        out.push({ id: String(r.id), data: JSON.stringify(rest), sourceData: JSON.stringify(source_data ?? null) });
      }
      if (body.meta.has_more_results === false || body.data.length === 0) break;
    }
    return out.slice(0, recordCount);
  } finally {
    await sb.close();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const adminUrl = new URL(baseUrl);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(baseUrl);
  url.pathname = `/${dbName}`;
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  try {
    const t0 = performance.now();
    const recs = await dataset();
    console.log(`dataset: ${recs.length} customers with source data from the sandbox (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    const upstreamBytes = recs.reduce((n, r) => n + Buffer.byteLength(r.data) + Buffer.byteLength(r.sourceData) + 16, 0);
    console.log(`upstream text: ${(upstreamBytes / recs.length).toFixed(0)} bytes a record with source data`);

    await db.query(`CREATE TABLE t_jsonb (id text PRIMARY KEY, ord bigint NOT NULL, data jsonb NOT NULL, source_data jsonb)`);
    await db.query(`CREATE TABLE t_json (id text PRIMARY KEY, ord bigint NOT NULL, data json NOT NULL, source_data json)`);
    await db.query(
      `CREATE TABLE t_both (id text PRIMARY KEY, ord bigint NOT NULL, data jsonb NOT NULL, source_data jsonb, data_text text NOT NULL, source_data_text text)`,
    );
    // One parameter per page, `[[records], [source data]]`, as the mirror's write path sends it.
    const inserts: Record<string, string> = {
      jsonb: `INSERT INTO t_jsonb (id, ord, data, source_data)
              SELECT d.value->>'id', $2::bigint + d.ordinality, d.value, s.value
                FROM jsonb_array_elements($1::jsonb->0) WITH ORDINALITY d JOIN jsonb_array_elements($1::jsonb->1) WITH ORDINALITY s USING (ordinality)`,
      json: `INSERT INTO t_json (id, ord, data, source_data)
             SELECT d.value->>'id', $2::bigint + d.ordinality, d.value, s.value
               FROM json_array_elements($1::json->0) WITH ORDINALITY d JOIN json_array_elements($1::json->1) WITH ORDINALITY s USING (ordinality)`,
      both: `INSERT INTO t_both (id, ord, data, source_data, data_text, source_data_text)
             SELECT d.value->>'id', $2::bigint + d.ordinality, d.value::jsonb, s.value::jsonb, d.value::text, s.value::text
               FROM json_array_elements($1::json->0) WITH ORDINALITY d JOIN json_array_elements($1::json->1) WITH ORDINALITY s USING (ordinality)`,
    };
    const writeMs: Record<string, number> = { jsonb: 0, json: 0, both: 0 };
    for (let start = 0; start < recs.length; start += writePage) {
      const page = recs.slice(start, start + writePage);
      const param = `[[${page.map((r) => r.data).join(',')}],[${page.map((r) => r.sourceData).join(',')}]]`;
      // Each page into each store in turn, so that drift of the machine spreads over all three.
      for (const store of Object.keys(inserts)) {
        const t = performance.now();
        await db.query(inserts[store]!, [param, start]);
        writeMs[store]! += performance.now() - t;
      }
    }
    for (const t of ['t_jsonb', 't_json', 't_both']) {
      await db.query(`CREATE INDEX ON ${t} (ord)`);
      await db.query(`VACUUM ANALYZE ${t}`);
    }

    console.log('\n| store | table bytes (heap+TOAST) | bytes a record | write, records/s (pages of 1,000) |');
    console.log('| --- | --- | --- | --- |');
    for (const store of ['jsonb', 'json', 'both']) {
      const { rows } = await db.query<{ bytes: string }>(`SELECT pg_table_size('t_${store}') AS bytes`);
      const bytes = Number(rows[0]!.bytes);
      console.log(
        `| ${store} | ${(bytes / 1e6).toFixed(1)} MB | ${(bytes / recs.length).toFixed(0)} | ${Math.round((recs.length / writeMs[store]!) * 1000).toLocaleString('en-US')} |`,
      );
    }

    // Filters and aggregates: each statement 7 times per store, alternating; the median.
    const statuses = (await db.query<{ s: string }>(`SELECT data->>'status' AS s FROM t_jsonb GROUP BY 1 ORDER BY count(*) LIMIT 1`)).rows[0]!.s;
    const sdKey = (await db.query<{ k: string }>(`SELECT jsonb_object_keys(source_data->'data') AS k FROM t_jsonb LIMIT 1 OFFSET 1`)).rows[0]?.k ?? 'id';
    const queries: Record<string, (t: string) => string> = {
      'filter on a field (count where status =)': (t) => `SELECT count(*) FROM ${t} WHERE data->>'status' = '${statuses}'`,
      'filter on a source_data field': (t) => `SELECT count(*) FROM ${t} WHERE source_data->'data'->>'${sdKey}' IS NOT NULL`,
      'aggregate (sum of balance by status)': (t) => `SELECT data->>'status', count(*), sum((data->>'balance')::numeric) FROM ${t} GROUP BY 1`,
    };
    console.log('\n| statement | jsonb ms | json ms | both ms |');
    console.log('| --- | --- | --- | --- |');
    for (const [what, sql] of Object.entries(queries)) {
      const ms: Record<string, number[]> = { jsonb: [], json: [], both: [] };
      for (let round = 0; round < 8; round++) {
        for (const store of ['jsonb', 'json', 'both']) {
          const t = performance.now();
          await db.query(sql(`t_${store}`));
          if (round > 0) ms[store]!.push(performance.now() - t);
        }
      }
      console.log(
        `| ${what} | ${median(ms.jsonb!).toFixed(1)} | ${median(ms.json!).toFixed(1)} (${(median(ms.json!) / median(ms.jsonb!)).toFixed(2)}x) | ${median(ms.both!).toFixed(1)} (${(median(ms.both!) / median(ms.jsonb!)).toFixed(2)}x) |`,
      );
    }

    // Pages of 100 read by position, the text of each object as served, with source data.
    const reads: Record<string, { sql: string; after?: (s: string) => string }> = {
      'jsonb, as today (data || source_data)::text': {
        sql: `SELECT (CASE WHEN source_data IS NULL THEN data ELSE data || jsonb_build_object('source_data', source_data) END)::text AS j FROM t_jsonb WHERE ord > $1 AND ord <= $1 + ${perPage} ORDER BY ord`,
      },
      'jsonb, source_data spliced last as text': {
        sql: `SELECT CASE WHEN source_data IS NULL THEN data::text ELSE left(data::text, -1) || ', "source_data": ' || source_data::text || '}' END AS j FROM t_jsonb WHERE ord > $1 AND ord <= $1 + ${perPage} ORDER BY ord`,
      },
      'jsonb, spliced, made compact by the reader': {
        sql: `SELECT CASE WHEN source_data IS NULL THEN data::text ELSE left(data::text, -1) || ', "source_data": ' || source_data::text || '}' END AS j FROM t_jsonb WHERE ord > $1 AND ord <= $1 + ${perPage} ORDER BY ord`,
        after: compactJsonbText,
      },
      'jsonb, JSON.parse and JSON.stringify by the reader': {
        sql: `SELECT (CASE WHEN source_data IS NULL THEN data ELSE data || jsonb_build_object('source_data', source_data) END)::text AS j FROM t_jsonb WHERE ord > $1 AND ord <= $1 + ${perPage} ORDER BY ord`,
        after: (s) => JSON.stringify(JSON.parse(s)),
      },
      "json, the upstream's text": {
        sql: `SELECT CASE WHEN source_data IS NULL THEN data::text ELSE left(data::text, -1) || ',"source_data":' || source_data::text || '}' END AS j FROM t_json WHERE ord > $1 AND ord <= $1 + ${perPage} ORDER BY ord`,
      },
      "both, the upstream's text beside jsonb": {
        sql: `SELECT CASE WHEN source_data_text IS NULL THEN data_text ELSE left(data_text, -1) || ',"source_data":' || source_data_text || '}' END AS j FROM t_both WHERE ord > $1 AND ord <= $1 + ${perPage} ORDER BY ord`,
      },
    };
    const starts = Array.from({ length: readPages }, (_, i) => (i * 7919) % Math.max(1, recs.length - perPage));
    const readMs: Record<string, number[]> = Object.fromEntries(Object.keys(reads).map((k) => [k, []]));
    const bytesOf: Record<string, number> = {};
    const rounds = 5;
    for (let round = 0; round < rounds + 1; round++) {
      for (const [what, r] of Object.entries(reads)) {
        const name = `r${Object.keys(reads).indexOf(what)}`;
        const t = performance.now();
        let bytes = 0;
        for (let i = round; i < starts.length; i += rounds + 1) {
          const { rows } = await db.query<{ j: string }>({ name, text: r.sql, values: [starts[i]] });
          for (const row of rows) bytes += (r.after ? r.after(row.j) : row.j).length;
        }
        if (round > 0) readMs[what]!.push(performance.now() - t);
        bytesOf[what] = bytes;
      }
    }
    const pagesPerRound = Math.floor(starts.length / (rounds + 1));
    const todayMs = median(readMs['jsonb, as today (data || source_data)::text']!);
    console.log(
      `\n| read of a page of ${perPage} with source data (one connection, ${pagesPerRound} pages a round, median of ${rounds}) | ms a page | vs today | characters a page |`,
    );
    console.log('| --- | --- | --- | --- |');
    for (const what of Object.keys(reads)) {
      const ms = median(readMs[what]!);
      console.log(`| ${what} | ${(ms / pagesPerRound).toFixed(3)} | ${(todayMs / ms).toFixed(2)}x | ${Math.round(bytesOf[what]! / pagesPerRound)} |`);
    }
  } finally {
    await db.end();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName}`);
    await admin.end();
  }
}

await main();
