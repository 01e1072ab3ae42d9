// `mirror rekey`: after MIRROR_ENCRYPTION_KEY or MIRROR_SIGNING_KEY changed, rewrites what the old
// keys sealed: account tokens and subscribers' authorization headers are re-encrypted (given the old
// encryption key), and token lookup hashes recomputed with the signing key (in the account-token hash
// domain: hashes stored before it are upgraded too). Idempotent.
import { decodeKey, decryptSecret, encryptSecret, keyedHash } from '../../lib/crypto.ts';
import { accountTokenHash } from '../../mirror/control/accounts.ts';
import { resealSecrets, sealedSecrets } from '../../mirror/control/sealed-secrets.ts';
import { accountsWithWebhooks } from '../../mirror/control/webhook-registrations.ts';
import { cliConfig, cliServices, exitCode, UsageError, type Command } from './shared.ts';

export const rekeyCommand: Command = {
  summary: 'Re-seal stored secrets after MIRROR_ENCRYPTION_KEY or MIRROR_SIGNING_KEY changed',
  usage: 'mirror rekey [--old-encryption-key <base64>] [--dry-run]',
  help:
    'Put the new keys in .env.local first (the old MIRROR_ENCRYPTION_KEY goes to --old-encryption-key), stop the API and workers, run this, start them again.\n' +
    "Account tokens and subscribers' authorization headers are decrypted with the old key (or the current one, for rows already rewritten) and encrypted with the new one; " +
    'token lookup hashes are recomputed with the current MIRROR_SIGNING_KEY (and hashes from before the account-token hash domain upgraded; the API also upgrades each on its next use). Upstream webhook secrets are checked with the signing key too: ' +
    'when it changed, the command names the accounts to re-register (`npx mirror webhooks register --account <id> --force`).',
  options: { 'old-encryption-key': { type: 'string' }, 'dry-run': { type: 'boolean' } },
  async run(v) {
    let oldKey: Buffer | undefined;
    if (typeof v['old-encryption-key'] === 'string') {
      try {
        oldKey = decodeKey(v['old-encryption-key']);
      } catch {
        throw new UsageError('--old-encryption-key is the previous MIRROR_ENCRYPTION_KEY: 32 bytes, base64.');
      }
    }
    const config = cliConfig();
    const services = await cliServices(config);
    try {
      const { encryptionKey, signingKey } = services.keys;
      const open = (sealed: Uint8Array): string => {
        try {
          return decryptSecret(encryptionKey, sealed);
        } catch (error) {
          if (!oldKey)
            throw new UsageError('a stored secret does not decrypt with MIRROR_ENCRYPTION_KEY: pass the previous key with --old-encryption-key.', {
              cause: error,
            });
          try {
            return decryptSecret(oldKey, sealed);
          } catch {
            throw new UsageError('a stored secret decrypts with neither MIRROR_ENCRYPTION_KEY nor --old-encryption-key: check both keys.', { cause: error });
          }
        }
      };
      const { accounts, tokens, subscriptions } = await sealedSecrets(services.prisma);
      const tokenUpdates = tokens.map((t) => {
        const token = open(t.tokenCiphertext);
        return {
          accountId: t.accountId,
          was: t.tokenHash,
          tokenHash: accountTokenHash(signingKey, token),
          tokenCiphertext: new Uint8Array(encryptSecret(encryptionKey, token)),
        };
      });
      const accountUpdates = accounts.map((a) => {
        const token = open(a.tokenCiphertext);
        const tokenHash = accountTokenHash(signingKey, token);
        // A hash from before the hash domains, made with this same key, is only upgraded: the key did not change.
        const legacy = a.tokenHash === keyedHash(signingKey, token);
        return {
          id: a.id,
          tokenCiphertext: new Uint8Array(encryptSecret(encryptionKey, token)),
          tokenHash,
          hashChanged: a.tokenHash !== tokenHash && !legacy,
          upgraded: legacy,
        };
      });
      const subscriptionUpdates = subscriptions.map((s) => ({
        id: s.id,
        authorizationCiphertext: new Uint8Array(encryptSecret(encryptionKey, open(s.authorizationCiphertext))),
      }));
      const rehashed = accountUpdates.filter((a) => a.hashChanged);
      const upgraded = accountUpdates.filter((a) => a.upgraded).length;
      if (!v['dry-run']) {
        await resealSecrets(services.prisma, { accounts: accountUpdates, tokens: tokenUpdates, subscriptions: subscriptionUpdates });
      }
      console.log(
        `${v['dry-run'] ? 'Would re-seal' : 'Re-sealed'} ${accountUpdates.length} account tokens (${rehashed.length} lookup hashes changed${upgraded ? `; ${upgraded} from before the account-token hash domain upgraded` : ''}) and ${subscriptionUpdates.length} subscriber authorization headers.`,
      );
      if (rehashed.length > 0) {
        const withHooks = await accountsWithWebhooks(
          services.prisma,
          rehashed.map((a) => a.id),
        );
        if (withHooks.length) {
          console.log('MIRROR_SIGNING_KEY changed: upstream webhooks of these accounts carry secrets checked with the old key. Register them again:');
          for (const accountId of withHooks) console.log(`  npx mirror webhooks register --account ${accountId} --force`);
        }
      }
      return exitCode.ok;
    } finally {
      await services.close();
    }
  },
};
