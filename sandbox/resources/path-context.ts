// The native path context of a scope (company, project, parent source ids), for `source_data.path`:
// shared by list routes and webhook notifications, so it depends on data types only.
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { ResourceName } from '../data/catalog.ts';
import type { Scope } from '../data/dataset.ts';
import type { PathContext } from '../data/raw-source.ts';

export function pathContext(account: LinkedAccount, scope: Scope, parentResource?: ResourceName): PathContext {
  const company = account.companies[scope.company];
  return {
    ...(company ? { companySourceId: company.source_id } : {}),
    ...(scope.project ? { projectSourceId: String(scope.project.fields.source_id) } : {}),
    ...(scope.parent && parentResource ? { parentSourceId: String(scope.parent.fields.source_id), parentResource } : {}),
  };
}
