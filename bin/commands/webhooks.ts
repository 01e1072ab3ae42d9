// `mirror webhooks`: the webhooks the mirror registered upstream for each account (which drive its
// incremental syncs), with what they delivered; `register` runs the registration again.
import { createEventActivities } from '../../activities/events.ts';
import { deleteWebhook } from '../../connectors/operations.ts';
import { UpstreamNotFoundError } from '../../lib/errors.ts';
import { deliveriesOverview, webhookRegistrations } from '../../mirror/ops/metrics-overview.ts';
import { deleteWebhookRegistration, webhookRegistrationsOf } from '../../mirror/control/webhook-registrations.ts';
import { publicBaseUrl, type Services } from '../services.ts';
import { cliConfig, cliServices, clip, required, resolveAccount, table, UsageError, type Command } from './shared.ts';

export const webhooksCommand: Command = {
  summary: "List an account's upstream webhooks, or register them again",
  usage: 'mirror webhooks [list] [--account <id>] [--json]\n       mirror webhooks register --account <id> [--force]',
  help:
    'list: the webhooks the mirror registered upstream (event, type, project, upstream id) with the events each delivered, and the outbound subscriptions your applications made on the mirror.\n' +
    "register: checks that the upstream still has the account's webhooks and registers what is missing (what every full pass does). --force first deletes every registration, upstream and here, " +
    'and registers them all again with fresh secrets: do it after changing PUBLIC_BASE_URL or rotating MIRROR_SIGNING_KEY (deliveries are checked against it).\n' +
    "The upstream calls back at PUBLIC_BASE_URL (else the API's address): it must reach the mirror's API from there.",
  options: { account: { type: 'string' }, force: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(v, positionals) {
    const action = positionals[0] ?? 'list';
    if (action !== 'list' && action !== 'register') throw new UsageError(`unknown action "${action}": list or register.`);
    if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}".`);
    const accountRef = action === 'register' ? required(v, 'account', 'see `npx mirror accounts`') : undefined;
    const config = cliConfig();
    const services = await cliServices(config);
    try {
      if (action === 'list') return await list(services, v);
      const accountId = await resolveAccount(services, accountRef!);
      let removed = 0;
      if (v.force) removed = await unregister(services, accountId);
      const activities = createEventActivities({
        upstream: services.upstream,
        pool: services.pool,
        accounts: services.accounts,
        logger: services.logger,
        prisma: services.prisma,
        publicBaseUrl: publicBaseUrl(config),
        hashKey: services.keys.signingKey,
      });
      const { registered, missing } = await activities.registerWebhooks({ accountId });
      const total = (await webhookRegistrations(services.pool, { accountId })).length;
      console.log(
        `${v.force ? `Removed ${removed} registrations; r` : 'R'}egistered ${registered} webhooks for ${accountId} (now ${total}` +
          `${missing > 0 ? `; ${missing} the upstream no longer had` : ''}), calling back at ${publicBaseUrl(config)}/webhooks/inbound/<id>.` +
          (total === 0 ? ' Its source system sends no webhooks: periodic passes keep it fresh.' : ''),
      );
    } finally {
      await services.close();
    }
  },
};

async function list(services: Services, v: Record<string, unknown>): Promise<number> {
  const accountId = typeof v.account === 'string' ? await resolveAccount(services, v.account) : undefined;
  const [registrations, subscriptions] = await Promise.all([webhookRegistrations(services.pool, { accountId }), deliveriesOverview(services.pool, 500)]);
  const subs = accountId ? subscriptions.filter((s) => s.accountId === accountId) : subscriptions;
  if (v.json) {
    console.log(JSON.stringify({ registrations, subscriptions: subs }, null, 2));
    return 0;
  }
  console.log('Upstream webhooks (they drive incremental syncs):');
  console.log(
    registrations.length
      ? table(
          ['account', 'event', 'type', 'project', 'upstream id', 'registered', '>events', 'last event'],
          registrations.map((r) => [
            r.accountId.slice(0, 8),
            r.event,
            r.type,
            r.projectId ?? '',
            r.upstreamId ?? '',
            r.createdAt,
            r.received,
            r.lastReceivedAt ?? '',
          ]),
        )
      : '  none (`npx mirror webhooks register --account <id>` registers them; SQL ERP sends none)',
  );
  console.log("\nOutbound subscriptions (your applications' webhooks on the mirror):");
  console.log(
    subs.length
      ? table(
          ['account', 'subscription', 'event', 'type', 'callback', '>delivered', '>backlog', '>failures', 'last error'],
          subs.map((s) => [s.accountId.slice(0, 8), s.id, s.event, s.type, s.callbackOrigin, s.delivered, s.backlog, s.failures, clip(s.lastError, 60)]),
        )
      : '  none',
  );
  return 0;
}

/** Deletes every registration of the account, upstream first (one already gone there is fine). */
async function unregister(services: Services, accountId: string): Promise<number> {
  const rows = await webhookRegistrationsOf(services.prisma, accountId);
  const account = await services.accounts.get(accountId);
  const token = await services.accounts.token(accountId);
  for (const r of rows) {
    if (r.upstreamId) {
      try {
        await deleteWebhook(services.upstream, { accountToken: token, accountId, sourceSystem: account.sourceSystem }, r.upstreamId);
      } catch (error) {
        if (!(error instanceof UpstreamNotFoundError)) throw error;
      }
    }
    await deleteWebhookRegistration(services.prisma, r.id);
  }
  return rows.length;
}
