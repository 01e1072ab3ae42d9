// Which network addresses the mirror may call on a subscriber's behalf. A callback URL that names, or
// resolves to, a loopback, private, link-local (cloud metadata), unspecified, multicast or reserved
// address would let any client of the mirror reach inside the operator's network. One guard checks a
// URL when a subscription is made and resolves the name again for every connection a delivery makes
// (the name may point elsewhere by then), so the address checked is the address connected to.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, isIPv4 } from 'node:net';

type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'unspecified' | 'multicast' | 'reserved';

/** Every address a host name resolves to (`dns.lookup` with `all`, in production). */
export type Resolver = (host: string) => Promise<LookupAddress[]>;

export interface CallbackPolicy {
  /** Operator's allow-list (MIRROR_CALLBACK_ALLOW): host names, addresses and CIDR ranges allowed although internal. */
  allow?: readonly string[];
  /** Name resolution; the system's resolver unless a test brings its own. */
  resolve?: Resolver;
}

/** A connection refused because its address is not allowed (the `code` lets callers tell it apart). */
export class CallbackRefusedError extends Error {
  readonly code = 'ECALLBACKREFUSED';
  constructor(
    readonly host: string,
    readonly addressClass: AddressClass,
  ) {
    super(`callback host ${host} resolves to a ${addressClass} address, which is not allowed`);
    this.name = 'CallbackRefusedError';
  }
}

/** IPv4 dotted quad to 4 bytes (the strict form only: URL parsing has already normalised odd ones). */
function ipv4Bytes(s: string): number[] | null {
  if (!isIPv4(s)) return null;
  return s.split('.').map(Number);
}

/** IPv6 text (no brackets, zone id allowed) to 16 bytes. */
function ipv6Bytes(text: string): number[] | null {
  const s = text.split('%')[0]!;
  if (isIP(s) !== 6) return null;
  let head = s;
  const tail: number[] = [];
  // An IPv4 address in the last 32 bits (`::ffff:1.2.3.4`).
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    tail.push(...ipv4Bytes(dotted[1]!)!);
    head = s.slice(0, -dotted[1]!.length);
    if (head.endsWith(':') && !head.endsWith('::')) head = head.slice(0, -1);
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const [left, right] = head.includes('::') ? (head.split('::') as [string, string]) : [head, undefined];
  const l = groups(left);
  const r = right === undefined ? [] : groups(right);
  const missing = 8 - tail.length / 2 - l.length - r.length;
  const words = [...l, ...Array<number>(right === undefined ? 0 : missing).fill(0), ...r];
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  return [...bytes, ...tail];
}

function parseCidr(entry: string): { bytes: number[]; prefix: number } | null {
  const [ip, bits, ...rest] = entry.split('/');
  if (rest.length > 0 || ip === undefined) return null;
  const bytes = ipv4Bytes(ip) ?? ipv6Bytes(ip);
  if (!bytes) return null;
  if (bits === undefined) return { bytes, prefix: bytes.length * 8 };
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > bytes.length * 8) return null;
  return { bytes, prefix: Number(bits) };
}

function inRange(bytes: readonly number[], range: { bytes: readonly number[]; prefix: number }): boolean {
  if (bytes.length !== range.bytes.length) return false;
  let bits = range.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i]! & mask) !== (range.bytes[i]! & mask)) return false;
  }
  return true;
}

const ranges = (list: [string, AddressClass][]) => list.map(([cidr, cls]) => ({ ...parseCidr(cidr)!, cls }));

// IANA's special-purpose registries (RFC 6890 and successors), as far as a callback is concerned.
const v4Ranges = ranges([
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'private'], // carrier-grade NAT
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'], // 169.254.169.254: cloud metadata
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'reserved'],
  ['192.88.99.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'],
  ['198.51.100.0/24', 'reserved'],
  ['203.0.113.0/24', 'reserved'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'], // with 255.255.255.255
]);
const v6Ranges = ranges([
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::/96', 'reserved'], // IPv4-compatible (deprecated)
  ['100::/64', 'reserved'], // discard
  ['64:ff9b:1::/48', 'reserved'], // local-use NAT64
  ['2001::/32', 'reserved'], // Teredo
  ['2001:10::/28', 'reserved'],
  ['2001:20::/28', 'reserved'],
  ['2001:db8::/32', 'reserved'],
  ['fc00::/7', 'private'], // unique local
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'private'], // site-local (deprecated)
  ['ff00::/8', 'multicast'],
]);
const globalUnicast = parseCidr('2000::/3')!;
/** IPv6 prefixes whose last or inner 32 bits are an IPv4 address that a gateway would connect to. */
const embedding: { range: { bytes: number[]; prefix: number }; at: number }[] = [
  { range: parseCidr('::ffff:0:0/96')!, at: 12 }, // IPv4-mapped
  { range: parseCidr('64:ff9b::/96')!, at: 12 }, // NAT64
  { range: parseCidr('2002::/16')!, at: 2 }, // 6to4
];

function classifyBytes(bytes: readonly number[]): AddressClass {
  if (bytes.length === 4) return v4Ranges.find((r) => inRange(bytes, r))?.cls ?? 'public';
  for (const e of embedding) if (inRange(bytes, e.range)) return classifyBytes(bytes.slice(e.at, e.at + 4));
  const hit = v6Ranges.find((r) => inRange(bytes, r));
  if (hit) return hit.cls;
  return inRange(bytes, globalUnicast) ? 'public' : 'reserved';
}

/** What kind of address `ip` is (v4 or v6 text, no brackets). Throws a TypeError for anything else. */
export function classifyAddress(ip: string): AddressClass {
  const bytes = ipv4Bytes(ip) ?? ipv6Bytes(ip);
  if (!bytes) throw new TypeError(`not an IP address: ${JSON.stringify(ip)}`);
  return classifyBytes(bytes);
}

/** IPv4-mapped IPv6 addresses compare as the IPv4 address they carry. */
function comparable(ip: string): number[] | null {
  const bytes = ipv4Bytes(ip) ?? ipv6Bytes(ip);
  if (bytes && bytes.length === 16 && inRange(bytes, embedding[0]!.range)) return bytes.slice(12);
  return bytes;
}

const hostName = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/i;

/** What is wrong with an allow-list entry (a host name, an address or a CIDR range), if anything. */
export function allowEntryProblem(entry: string): string | undefined {
  if (parseCidr(entry)) return undefined;
  if (entry.includes('/') || isIP(entry) || /^[\d.]+$/.test(entry) || entry.includes(':'))
    return `"${entry}" is not a valid address or CIDR range (e.g. 10.0.0.0/8, fd00::/8)`;
  if (!hostName.test(entry)) return `"${entry}" is not a host name, an address or a CIDR range`;
  return undefined;
}

/** Host as it is compared: lower case, no brackets, no trailing dot. */
function normalHost(host: string): string {
  return host
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
}

const systemResolver: Resolver = (host) =>
  new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))));

type CallbackVerdict = { ok: true; url: URL } | { ok: false; reason: string };

export interface CallbackGuard {
  /** Whether a connection to this address is allowed (public, or on the allow-list). */
  addressAllowed: (ip: string) => boolean;
  /** Checks a callback URL as a subscription is made: its form, and every address its host resolves to. */
  checkUrl: (raw: string) => Promise<CallbackVerdict>;
  /**
   * A `lookup` for `net.connect`/`tls.connect` (undici's `connect` options): resolves the host and
   * hands back only checked addresses, or fails with CallbackRefusedError.
   */
  lookup: (
    hostname: string,
    options: LookupOptions,
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => void;
}

export function createCallbackGuard(policy: CallbackPolicy = {}): CallbackGuard {
  const resolve = policy.resolve ?? systemResolver;
  const hosts = new Set<string>();
  const allowed: { bytes: number[]; prefix: number }[] = [];
  for (const entry of policy.allow ?? []) {
    const cidr = parseCidr(entry.trim());
    if (cidr)
      allowed.push(
        cidr.bytes.length === 16 && inRange(cidr.bytes, embedding[0]!.range) && cidr.prefix >= 96
          ? { bytes: cidr.bytes.slice(12), prefix: cidr.prefix - 96 }
          : cidr,
      );
    else if (entry.trim() !== '') hosts.add(normalHost(entry.trim()));
  }
  const onList = (ip: string) => {
    const bytes = comparable(ip);
    return bytes !== null && allowed.some((r) => inRange(bytes, r));
  };
  const addressAllowed = (ip: string) => onList(ip) || classifyAddress(ip) === 'public';
  /** The first address that is not allowed, with its class. */
  const firstBlocked = (addresses: readonly LookupAddress[]) => {
    const bad = addresses.find((a) => !addressAllowed(a.address));
    return bad ? { address: bad.address, cls: classifyAddress(bad.address) } : undefined;
  };
  const howToAllow = 'an operator can allow internal receivers with MIRROR_CALLBACK_ALLOW';

  return {
    addressAllowed,

    async checkUrl(raw) {
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        return { ok: false, reason: 'callback_url must be an absolute http(s) URL' };
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'callback_url must be an http(s) URL' };
      if (url.username !== '' || url.password !== '')
        return { ok: false, reason: 'callback_url must not contain a user name or password (use authorization_header)' };
      const host = normalHost(url.hostname);
      if (hosts.has(host)) return { ok: true, url };
      if (isIP(host)) {
        // URL parsing has turned 127.1, 2130706433, 0x7f000001 and 0177.0.0.1 into 127.0.0.1.
        if (addressAllowed(host)) return { ok: true, url };
        return {
          ok: false,
          reason: `callback_url points at a ${classifyAddress(host)} address (${host}); the mirror delivers only to public addresses (${howToAllow})`,
        };
      }
      if (host === 'localhost' || host.endsWith('.localhost'))
        return { ok: false, reason: `callback_url points at a loopback address (${host}); the mirror delivers only to public addresses (${howToAllow})` };
      let addresses: LookupAddress[];
      try {
        addresses = await resolve(host);
      } catch {
        addresses = [];
      }
      // One answer whether the name is internal or unknown: the reply tells nothing of internal DNS.
      if (addresses.length === 0 || firstBlocked(addresses)) {
        return {
          ok: false,
          reason: `callback_url host ${host} does not resolve to a public address only; the mirror delivers only to public addresses (${howToAllow})`,
        };
      }
      return { ok: true, url };
    },

    lookup(hostname, options, callback) {
      const host = normalHost(hostname);
      const answer = (addresses: LookupAddress[]) => {
        const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
        if (wanted.length === 0) return callback(Object.assign(new Error(`no address for ${host}`), { code: 'ENOTFOUND' }), options.all ? [] : '');
        if (options.all) return callback(null, wanted);
        return callback(null, wanted[0]!.address, wanted[0]!.family);
      };
      if (isIP(host)) {
        if (!addressAllowed(host)) return callback(new CallbackRefusedError(host, classifyAddress(host)), options.all ? [] : '');
        return answer([{ address: host, family: isIP(host) }]);
      }
      resolve(host).then(
        (addresses) => {
          const bad = hosts.has(host) ? undefined : firstBlocked(addresses);
          if (bad) return callback(new CallbackRefusedError(host, bad.cls), options.all ? [] : '');
          answer(addresses);
        },
        (error: NodeJS.ErrnoException) => callback(error, options.all ? [] : ''),
      );
    },
  };
}
