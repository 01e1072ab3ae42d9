// The XML pass-through of the XML accounting system: `<EntityQueryRq>` messages answered with the
// matching records, returned as JSON (the pass-through response is always JSON).
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { isTopLevel } from '../data/catalog.ts';
import { nativeResourceOf, rawObject } from '../data/raw-source.ts';
import type { SourceAnswer } from './sql.ts';

function tag(xml: string, name: string): string | undefined {
  return new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1]?.trim();
}

export function runXml(ctx: SandboxContext, account: LinkedAccount, xml: string): SourceAnswer {
  const profile = account.profile;
  const m = /<(\w+)QueryRq\b[^>]*>/.exec(xml);
  const path = m ? `${m[1]}QueryRq` : 'unknown';
  if (!m || !/^\s*(<\?xml[^>]*\?>\s*)?</.test(xml)) {
    return {
      status: 400,
      body: { statusCode: '-1', statusSeverity: 'Error', statusMessage: 'The request is not a supported XML query message' },
      path,
      contentType: 'text/xml',
    };
  }
  const entity = m[1]!;
  const resource = nativeResourceOf(profile, entity);
  if (!resource || !isTopLevel(resource)) {
    return {
      status: 200,
      body: { [`${entity}QueryRs`]: { statusCode: '3250', statusSeverity: 'Error', statusMessage: `${entity} is not a queryable entity` } },
      path,
      contentType: 'text/xml',
    };
  }
  const scope = { company: 0, project: null, parent: null };
  const max = Number(tag(xml, 'MaxReturned') ?? 100);
  const listId = tag(xml, 'ListID');
  const from = tag(xml, 'FromModifiedDate');
  let rows;
  if (listId) {
    const found = ctx.dataset.find(account, resource, scope, `source_id:${listId}`);
    rows = found ? [rawObject(profile, resource, found.fields)] : [];
  } else if (from) {
    rows = ctx.dataset
      .all(account, resource, scope)
      .filter((f) => String(f.source_update_time) >= new Date(from).toISOString())
      .slice(0, max)
      .map((f) => rawObject(profile, resource, f));
  } else {
    rows = ctx.dataset.list(account, resource, [scope], { offset: 0, limit: max }).items.map((f) => rawObject(profile, resource, f));
  }
  const status =
    rows.length === 0
      ? { statusCode: '1', statusSeverity: 'Info', statusMessage: 'A query request did not find a matching object' }
      : { statusCode: '0', statusSeverity: 'Info', statusMessage: 'Status OK' };
  return { status: 200, body: { [`${entity}QueryRs`]: { ...status, [`${entity}Ret`]: rows } }, path, contentType: 'text/xml' };
}
