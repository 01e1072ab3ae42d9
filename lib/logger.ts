// The one logger: pino, JSON to stdout, with every credential-bearing field redacted wherever it sits.
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger };

const secretKeys = [
  'client-secret',
  'clientSecret',
  'client_secret',
  'account-token',
  'accountToken',
  'account_token',
  'authorization',
  'Authorization',
  'authorization_header',
  'authorizationHeader',
  'session',
  'Session',
  'token',
  'link_token',
  'linkToken',
  'public_token',
  'publicToken',
  'secret',
  'password',
  'encryptionKey',
  'signingKey',
];

function bracket(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `["${key}"]`;
}

/** Redaction paths: each secret key at the top level and up to three levels deep. */
const redactPaths: string[] = secretKeys.flatMap((key) => {
  const k = bracket(key);
  return [k.startsWith('.') ? k.slice(1) : k, `*${k}`, `*.*${k}`, `*.*.*${k}`];
});

export function createLogger(options: { level?: string; name?: string; destination?: pino.DestinationStream } = {}): Logger {
  const base: LoggerOptions = {
    level: options.level ?? process.env.LOG_LEVEL ?? 'info',
    redact: { paths: redactPaths, censor: '[redacted]' },
    base: options.name ? { name: options.name } : {},
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return options.destination ? pino(base, options.destination) : pino(base);
}
