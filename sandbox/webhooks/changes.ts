// Applies a change to an account's data and announces it to the matching webhooks. Used by the
// admin API, the unified write endpoints and churn mode alike, so all three behave the same.
import { asText } from '../data/as-text.ts';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import { webhookTypeOf, type ResourceName } from '../data/catalog.ts';
import type { Dataset, Scope } from '../data/dataset.ts';
import type { Fields } from '../data/generators.ts';
import { nativePath, rawObject } from '../data/raw-source.ts';
import { pathContext } from '../resources/path-context.ts';
import type { WebhookRegistry } from './registry.ts';

/** What a change needs of the sandbox (a SandboxContext has it; named here so this module needs no context.ts). */
export interface ChangeContext {
  dataset: Dataset;
  webhooks: WebhookRegistry;
}

type Change = { op: 'create'; object: Fields } | { op: 'update'; id: string; patch: Fields } | { op: 'delete'; id: string };

const eventOf = { create: 'CREATE', update: 'UPDATE', delete: 'DELETE' } as const;

/** Returns the created, updated or deleted record; null when the target does not exist. */
export function applyChange(
  ctx: ChangeContext,
  account: LinkedAccount,
  resource: ResourceName,
  scope: Scope,
  change: Change,
  parentResource?: ResourceName,
): Fields | null {
  const d = ctx.dataset;
  const fields =
    change.op === 'create'
      ? d.create(account, resource, scope, change.object)
      : change.op === 'update'
        ? d.update(account, resource, scope, change.id, change.patch)
        : d.remove(account, resource, scope, change.id);
  if (fields) announce(ctx, account, resource, scope, eventOf[change.op], fields, parentResource);
  return fields;
}

function announce(
  ctx: ChangeContext,
  account: LinkedAccount,
  resource: ResourceName,
  scope: Scope,
  event: 'CREATE' | 'UPDATE' | 'DELETE',
  fields: Fields,
  parentResource?: ResourceName,
): void {
  const type = webhookTypeOf(resource);
  const profile = account.profile;
  if (!profile.webhookTypes.includes(type)) return;
  const projectId = scope.project?.id;
  const targetId = String(fields.id);
  const hooks = ctx.webhooks.matching(account.key, event, type, projectId, targetId);
  if (hooks.length === 0) return;
  const sourceId = fields.source_id === undefined || fields.source_id === null ? null : asText(fields.source_id);
  // The source system's own notification, as it would have sent it.
  const notification = {
    event_type: event.toLowerCase(),
    resource_name: type,
    resource_id: sourceId,
    ...(scope.project ? { project_id: scope.project.fields.source_id } : {}),
    company_id: account.companies[scope.company]?.source_id,
    timestamp: asText(fields.source_update_time ?? new Date().toISOString()),
    ...(event === 'DELETE' ? {} : { payload: rawObject(profile, resource, fields) }),
  };
  for (const hook of hooks) {
    ctx.webhooks.deliver(hook, {
      event,
      ...(projectId ? { project_id: projectId } : {}),
      target: targetId,
      type,
      source_data: {
        path: nativePath(profile, resource, sourceId, pathContext(account, scope, parentResource)),
        content_type: 'application/json',
        data: notification,
      },
    });
  }
}
