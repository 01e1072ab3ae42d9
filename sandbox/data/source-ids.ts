// Source-system identifiers in each system's own style. They depend only on the account, the
// resource and the index, like the service ids, so the k-th line item of every invoice shares one.
import type { SourceIdStyle } from '../source-systems/profiles.ts';
import { childResources, contractResourceNames, topLevelResources, type ResourceName } from './catalog.ts';
import { hash32 } from './random.ts';

// The contract's resources first, in their order, so their source ids never move when resources join.
const contract = [...topLevelResources, ...childResources].filter((r) => contractResourceNames.has(r));
const ordinals = new Map<string, number>([...contract, ...topLevelResources.filter((r) => !contractResourceNames.has(r))].map((r, n) => [r, n]));

const sqlCodes: Partial<Record<ResourceName, string>> = {
  projects: 'PRJ',
  jobs: 'JOB',
  customers: 'CUS',
  vendors: 'VEN',
  'ap-invoices': 'APH',
  'cost-codes': 'CC',
};

const crmPrefixes: Partial<Record<ResourceName, string>> = {
  customers: '001',
  leads: '00Q',
  opportunities: '006',
  activities: '00U',
};

export function sourceIdOf(style: SourceIdStyle, accountKey: string, resource: ResourceName, i: number, child: boolean): string {
  // Line items, versions: numbered within their parent, as source systems do.
  if (child) return String(i + 1);
  const ordinal = ordinals.get(resource) ?? 0;
  switch (style) {
    case 'numeric':
      return String((ordinal + 1) * 10_000_000 + 1000 + i);
    case 'opaque':
      return `${(hash32(`${accountKey}|${resource}`) >>> 8).toString(16).padStart(6, '0')}${(i + 1).toString(16).padStart(8, '0')}`;
    case 'coded':
      return `${sqlCodes[resource] ?? 'ROW'}${String(i + 1).padStart(6, '0')}`;
    case 'list-id':
      return `${(0x80000000 + i + 1).toString(16).toUpperCase()}-${1600000000 + ordinal}`;
    case 'crm':
      return `${crmPrefixes[resource] ?? '0XX'}5g00000${(i + 1).toString(36).toUpperCase().padStart(8, '0')}`;
  }
}
