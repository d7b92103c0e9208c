// The egress policy of what the workers reach on users' behalf: export destinations
// (EXPORT_EGRESS_ALLOW, docs/exports.md "Egress policy") and plugins' fetch (PLUGIN_EGRESS_ALLOW,
// docs/plugins.md). A host that resolves to a loopback, private, link-local (cloud metadata) or
// otherwise non-public address is refused unless the setting allows it. The check runs on every
// address a connection resolves (a lookup hook of the HTTP agents, the PostgreSQL host resolved
// first and connected to by address), so a name that resolves differently later (DNS rebinding)
// is checked again.
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** How a role reports refusals: its own error classes, so its failure handling stays its own. */
export interface EgressErrors {
  /** The setting that allows more, named in messages (EXPORT_EGRESS_ALLOW, PLUGIN_EGRESS_ALLOW). */
  setting: string;
  /** What a host is called in messages ("destination host", "fetch host"). */
  what: string;
  refused(message: string): Error;
  notFound(message: string): Error;
}

const LOOPBACK: Array<[string, number, 'ipv4' | 'ipv6']> = [
  ['127.0.0.0', 8, 'ipv4'],
  ['::1', 128, 'ipv6'],
];
/** Private, shared, link-local, unspecified, multicast and reserved ranges: never the public internet. */
const PRIVATE: Array<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 3, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['2001::', 32, 'ipv6'], // Teredo: tunnels to an IPv4 address it hides
  ['2001:db8::', 32, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
];

/**
 * The IPv4 address inside an IPv6 one that routes to it: IPv4-mapped ::ffff:a.b.c.d, NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48 (last 32 bits), 6to4 2002:aabb:ccdd::/48 (bits 16–47).
 */
export function embeddedIPv4(address: string): string | undefined {
  if (!ipaddr.IPv6.isValid(address)) return undefined;
  const ip = ipaddr.IPv6.parse(address);
  if (ip.isIPv4MappedAddress()) return ip.toIPv4Address().toString();
  const [w0, w1, w2, , , , w6, w7] = ip.parts as [number, number, number, number, number, number, number, number];
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (ip.range() === 'rfc6052' || (w0 === 0x64 && w1 === 0xff9b && w2 === 1)) return v4(w6, w7);
  if (ip.range() === '6to4') return v4(w1, w2);
  return undefined;
}

export interface EgressPolicy {
  /** Throws the role's refused error when `address` (an IP) may not be reached for `host`. */
  check(host: string, address: string): void;
  /** A dns.lookup replacement for agents and sockets: resolves, then checks every address. */
  lookup: typeof dnsLookup;
  /** Resolves `host` and checks every address; returns the first. */
  resolve(host: string): Promise<string>;
  readonly description: string;
}

/**
 * `allow`: comma-separated `loopback`, `private` and CIDR ranges (`10.1.0.0/16`, `fd00::/8`)
 * that may be reached even though they are not public.
 */
export function egressPolicy(allow: string, errors: EgressErrors): EgressPolicy {
  const items = allow.split(',').map((s) => s.trim()).filter(Boolean);
  const allowed = new BlockList();
  for (const item of items) {
    if (item === 'loopback') for (const [a, p, t] of LOOPBACK) allowed.addSubnet(a, p, t);
    else if (item === 'private') for (const [a, p, t] of PRIVATE) allowed.addSubnet(a, p, t);
    else {
      const [address, prefix] = item.split('/');
      const family = isIP(address ?? '');
      if (!family || (prefix !== undefined && !/^\d{1,3}$/.test(prefix))) throw new Error(`${errors.setting}: ${JSON.stringify(item)} is not loopback, private or a CIDR range`);
      allowed.addSubnet(address!, prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix), family === 4 ? 'ipv4' : 'ipv6');
    }
  }
  const loopback = new BlockList();
  for (const [a, p, t] of LOOPBACK) loopback.addSubnet(a, p, t);
  const privateRanges = new BlockList();
  for (const [a, p, t] of PRIVATE) privateRanges.addSubnet(a, p, t);

  const refusedErrors = new WeakSet<object>();
  const check = (host: string, address: string) => {
    // An IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4) reaches that IPv4 address.
    const ip = embeddedIPv4(address) ?? address;
    const type = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
    const kind = loopback.check(ip, type) ? 'loopback' : privateRanges.check(ip, type) ? 'private or reserved' : undefined;
    if (kind && !allowed.check(ip, type)) {
      const refused = errors.refused(`${errors.what} ${host} resolves to ${address}, a ${kind} address: refused by the egress policy (allow it with ${errors.setting})`);
      refusedErrors.add(refused);
      throw refused;
    }
  };

  const lookup = ((hostname: string, options: unknown, callback: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
    const opts = (typeof options === 'object' && options !== null ? options : typeof options === 'number' ? { family: options } : {}) as LookupOneOptions | LookupAllOptions;
    dnsLookup(hostname, { ...opts, all: true }, (err, addresses) => {
      if (err) return cb(err, []);
      try {
        for (const a of addresses) check(hostname, a.address);
      } catch (refused) {
        return cb(refused as NodeJS.ErrnoException, []);
      }
      if ((opts as LookupAllOptions).all) return cb(null, addresses);
      const first = addresses[0]!;
      cb(null, first.address, first.family);
    });
  }) as typeof dnsLookup;

  const resolve = (host: string) =>
    new Promise<string>((resolvePromise, reject) => {
      lookup(host, { all: false }, (err, address) => (err ? reject(refusedErrors.has(err) ? err : errors.notFound(`${errors.what} ${host} does not resolve: ${err.message}`)) : resolvePromise(address)));
    });

  return { check, lookup, resolve, description: items.length ? items.join(', ') : 'public addresses only' };
}
