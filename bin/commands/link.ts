// `mirror link`: links an account through the mirror. Creates a link token upstream, prints the Link
// URL, waits for the public token (the Link page's redirect to a one-time local callback, a pasted
// token, or, against the sandbox, one minted by its admin API), exchanges it, registers the account
// and starts its first sync and its schedules.
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { linkWithPublicToken } from '../../api/link-service.ts';
import { createLinkToken } from '../../connectors/operations.ts';
import { MirrorError } from '../../lib/errors.ts';
import { followPass } from './sync-progress.ts';
import { cliConfig, cliServices, connectTemporal, exitCode, required, UsageError, type Command } from './shared.ts';

export const linkCommand: Command = {
  summary: 'Link an account: print the Link URL, finish the token exchange, start its first sync',
  usage: 'mirror link --reference-id <id> [--source-system <slug>] [--public-token <token>] [--no-sync] [--watch] [--timeout 600]',
  help:
    'Creates a link token for your reference id (your own id for the user or company) and prints the Link URL. Open it in a browser and sign in: ' +
    'the Link page hands the public token back to this command (a one-time callback on 127.0.0.1), or paste it here. ' +
    'Against the sandbox, --source-system <slug> (buildpro, docvault, sqlerp, xmlbooks, graphledger, crmcloud, fieldops) completes the Link page for you.\n' +
    "The Link URL is the upstream's `/link` page (the sandbox's); where a real upstream's Link lives elsewhere, run your Link integration and pass its public token with --public-token, which skips straight to the exchange.\n" +
    "Prints the account id and its Account-Token (what your application sends to the mirror, with MIRROR_CLIENT_ID's credentials: the account belongs to that client), then starts the first full sync and the periodic schedules; --watch follows the sync.\n" +
    'Linking the same reference id again keeps the account and its mirrored data only when the upstream names the same linked company and user; otherwise it is a new account.\n' +
    'Example: mirror link --reference-id acme-42 --source-system buildpro --watch',
  options: {
    'reference-id': { type: 'string' },
    'source-system': { type: 'string' },
    'public-token': { type: 'string' },
    'no-sync': { type: 'boolean' },
    watch: { type: 'boolean' },
    timeout: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(v) {
    const timeoutSeconds = v.timeout ? Number(v.timeout) : 600;
    if (!(timeoutSeconds > 0)) throw new UsageError('--timeout is a number of seconds.');
    if (v['no-sync'] && v.watch) throw new UsageError('--watch follows the first sync, which --no-sync skips.');
    const referenceId = typeof v['public-token'] === 'string' ? undefined : required(v, 'reference-id', 'your own id for this user or company');
    const config = cliConfig();
    const services = await cliServices(config);
    const temporal = v['no-sync'] ? undefined : await connectTemporal(config);
    try {
      let publicToken = typeof v['public-token'] === 'string' ? v['public-token'] : undefined;
      if (!publicToken) {
        const linkToken = await createLinkToken(services.upstream, referenceId!);
        const base = config.UPSTREAM_BASE_URL.replace(/\/+$/, '');
        if (typeof v['source-system'] === 'string') {
          console.error(`Link URL: ${base}/link?link_token=${encodeURIComponent(linkToken)}`);
          publicToken = await sandboxPublicToken(base, config, linkToken, v['source-system']);
          console.error(`The sandbox completed the Link page for ${v['source-system']}.`);
        } else {
          publicToken = await awaitPublicToken(base, linkToken, timeoutSeconds * 1000);
        }
      }
      // The CLI links as the configured MIRROR_CLIENT_ID: the account answers to that client's credentials.
      const { account, linked } = await linkWithPublicToken(
        { upstream: services.upstream, accounts: services.accounts, sync: temporal?.sync, clientId: config.MIRROR_CLIENT_ID },
        publicToken,
      );
      const workflowId = temporal ? temporal.sync.workflowId({ accountId: account.id }) : undefined;
      if (v.json) {
        console.log(
          JSON.stringify({
            accountId: account.id,
            accountToken: linked.account_token,
            referenceId: account.referenceId,
            sourceSystem: account.sourceSystem,
            syncWorkflowId: workflowId ?? null,
          }),
        );
      } else {
        console.log(`Linked ${account.sourceSystemName} (${account.sourceSystem}) for reference ${account.referenceId}.`);
        console.log(`  Account id:    ${account.id}`);
        console.log(`  Account-Token: ${linked.account_token}`);
        console.log(
          workflowId
            ? `  First sync:    workflow ${workflowId}, schedules account-full:${account.id} and account-incremental:${account.id}`
            : '  No sync started (--no-sync): `npx mirror sync --account <id>` starts one.',
        );
      }
      if (v.watch && temporal) {
        const handle = temporal.sync.client.workflow.getHandle(workflowId!);
        const started = (await handle.describe()).startTime;
        const result = await followPass({ pool: services.pool, sync: temporal.sync, handle, accountId: account.id, since: new Date(started.getTime() - 1000) });
        console.error(
          `First sync done: ${result.records} records in ${result.streams} streams${result.failed.length ? `, ${result.failed.length} failed` : ''}.`,
        );
        return result.failed.length ? exitCode.failed : exitCode.ok;
      }
      return exitCode.ok;
    } finally {
      await temporal?.close();
      await services.close();
    }
  },
};

/** The sandbox's admin API plays the person on the Link page. */
async function sandboxPublicToken(
  base: string,
  config: { UPSTREAM_CLIENT_ID: string; UPSTREAM_CLIENT_SECRET: string },
  linkToken: string,
  sourceSystem: string,
): Promise<string> {
  const res = await fetch(`${base}/_admin/link/public-token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'client-id': config.UPSTREAM_CLIENT_ID, 'client-secret': config.UPSTREAM_CLIENT_SECRET },
    body: JSON.stringify({ link_token: linkToken, source_system: sourceSystem }),
  });
  if (res.status === 404) throw new UsageError('--source-system works against the sandbox only: open the Link URL instead (leave --source-system out).');
  if (!res.ok) {
    const body = (await res.json().catch(() => ({}))) as { message?: string };
    throw new UsageError(
      `the sandbox refused source system "${sourceSystem}" (${res.status} ${body.message ?? ''}); slugs: buildpro, docvault, sqlerp, xmlbooks, graphledger, crmcloud, fieldops.`,
    );
  }
  return ((await res.json()) as { public_token: string }).public_token;
}

/**
 * Prints the Link URL (with a one-time local callback as its redirect) and resolves with the public
 * token that arrives first: through the callback, or pasted on standard input.
 */
async function awaitPublicToken(base: string, linkToken: string, timeoutMs: number): Promise<string> {
  let resolveToken!: (t: string) => void;
  const token = new Promise<string>((r) => (resolveToken = r));
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const t = url.searchParams.get('public_token');
    if (url.pathname !== '/callback' || !t) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><p>Linked. You can close this tab and go back to the terminal.</p>');
    resolveToken(t);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  const redirect = `http://127.0.0.1:${port}/callback`;
  console.error('Open the Link URL in a browser and sign in; this command waits for the result.');
  console.log(`${base}/link?link_token=${encodeURIComponent(linkToken)}&redirect_uri=${encodeURIComponent(redirect)}`);
  let rl: ReturnType<typeof createInterface> | undefined;
  if (process.stdin.isTTY) {
    console.error('(Or paste the public token here and press Enter.)');
    rl = createInterface({ input: process.stdin });
    rl.on('line', (line) => {
      if (line.trim()) resolveToken(line.trim());
    });
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new MirrorError(
            `No public token arrived within ${Math.round(timeoutMs / 1000)} s: run \`npx mirror link\` again (the link token expires after 30 minutes), or pass --public-token.`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([token, timeout]);
  } finally {
    clearTimeout(timer);
    rl?.close();
    server.close();
  }
}
