/**
 * The client address of a request, for limits per client address (docs/contract.md#limit-by):
 *   - the TCP peer, unless the peer is a trusted proxy (`trusted_proxies`);
 *   - then the rightmost `X-Forwarded-For` entry that is not a trusted proxy: each trusted proxy appends
 *     the address it saw, so walking from the right over trusted hops reaches the first address no
 *     trusted party vouches for beyond having seen it. Entries further left were written by the client
 *     and get no say;
 *   - an entry that is not an address ends the walk at the last trusted hop (the proxy whose claim is
 *     unusable is the client as far as the gateway can tell); every entry trusted: the leftmost;
 *   - IPv6 clients are grouped by their /`ipv6_prefix` network (a host gets a /64, and rotating through it
 *     costs nothing), IPv4-mapped IPv6 is IPv4.
 * Entries are read leniently, as proxies write them: spaces around, `"quotes"`, `[v6]`, `[v6]:port`,
 * `v4:port`, a zone (`fe80::1%eth0`); empty entries (`a,,b`) are skipped.
 */
import { cidrContains, formatCidr, formatIp, maskIp, parseCidr, parseIp, type Cidr, type Ip } from './address.js';

/** Whether s[from, to) is 1–5 digits (a port). */
function isPort(s: string, from: number, to: number): boolean {
  if (to - from < 1 || to - from > 5) return false;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

const isSpace = (c: number): boolean => c === 32 || c === 9;

/** One X-Forwarded-For entry, s[from, to): an address, or undefined when it is none. */
export function parseForwardedEntry(s: string, from = 0, to = s.length): Ip | undefined {
  while (from < to && isSpace(s.charCodeAt(from))) from++;
  while (to > from && isSpace(s.charCodeAt(to - 1))) to--;
  if (to - from >= 2 && s.charCodeAt(from) === 34 && s.charCodeAt(to - 1) === 34) {
    from++;
    to--;
  }
  if (from === to) return undefined;
  if (s.charCodeAt(from) === 91 /* [ */) {
    const close = s.indexOf(']', from);
    if (close === -1 || close >= to) return undefined;
    if (close + 1 < to && !(s.charCodeAt(close + 1) === 58 && isPort(s, close + 2, to))) return undefined;
    const ip = parseIp(s, from + 1, close);
    // brackets hold IPv6 text only (a mapped IPv4 included)
    return ip && s.lastIndexOf(':', close) > from ? ip : undefined;
  }
  const colon = s.indexOf(':', from);
  const second = colon === -1 || colon >= to ? -1 : s.indexOf(':', colon + 1);
  if (colon !== -1 && colon < to && (second === -1 || second >= to)) {
    // one colon: IPv4 with a port (IPv6 text has at least two)
    if (!isPort(s, colon + 1, to)) return undefined;
    const ip = parseIp(s, from, colon);
    return ip && ip.v === 4 ? ip : undefined;
  }
  return parseIp(s, from, to);
}

/** An address's group: the IPv4 address, or the IPv6 network of /`ipv6Prefix` (`2001:db8:1:2::/64`). */
function groupOf(ip: Ip, ipv6Prefix: number): string {
  if (ip.v === 4) return formatIp(ip);
  return formatCidr({ v: 6, ip: maskIp(ip, ipv6Prefix), prefix: ipv6Prefix });
}

/**
 * The group a socket's peer address is counted in where no trusted proxy has a say (connections per
 * client on a listener, the facade's guess limit): as `ClientAddresses.group`, an IPv6 host counted by
 * its /64 (it is usually given a whole one), IPv4-mapped IPv6 as IPv4. 'unknown' for a socket without
 * an address (already gone); text that is not an address is its own group.
 */
export function addressGroup(address: string | undefined, ipv6Prefix = 64): string {
  if (!address) return 'unknown';
  // Node's text of an IPv4 peer is already canonical
  if (address.indexOf(':') === -1) return address;
  const ip = parseIp(address);
  return ip ? groupOf(ip, ipv6Prefix) : address;
}

export class ClientAddresses {
  private readonly trusted: Cidr[];

  /** `trusted`: CIDR blocks or addresses (validated at load: a bad one throws here, naming it). */
  constructor(
    trusted: readonly string[],
    private readonly ipv6Prefix = 64,
  ) {
    this.trusted = trusted.map((t) => {
      const c = parseCidr(t);
      if (typeof c === 'string') throw new Error(`trusted_proxies: ${c}`);
      return c;
    });
  }

  /** Whether an address is one of the trusted proxies. */
  trusts(ip: Ip): boolean {
    for (const c of this.trusted) if (cidrContains(c, ip)) return true;
    return false;
  }

  /** The client address of a request from `peer` (the TCP peer) with that X-Forwarded-For header. */
  address(peer: string | undefined, xff: string | string[] | undefined): Ip | undefined {
    const ip = peer === undefined ? undefined : parseIp(peer);
    if (!ip || this.trusted.length === 0 || !this.trusts(ip) || xff === undefined) return ip;
    const h = Array.isArray(xff) ? xff.join(',') : xff;
    let last = ip; // the nearest hop so far, trusted
    let end = h.length;
    for (;;) {
      const start = end === 0 ? -1 : h.lastIndexOf(',', end - 1);
      const from = start + 1;
      let blank = true;
      for (let i = from; i < end && blank; i++) blank = isSpace(h.charCodeAt(i));
      if (!blank) {
        const e = parseForwardedEntry(h, from, end);
        if (!e) return last;
        if (!this.trusts(e)) return e;
        last = e;
      }
      if (start === -1) break;
      end = start;
    }
    return last;
  }

  /**
   * The identity a per-address limit counts against: the IPv4 address, or the IPv6 network of
   * /ipv6_prefix (`2001:db8:1:2::/64`); '' when the peer is unknown (a socket already gone).
   */
  of(peer: string | undefined, xff: string | string[] | undefined): string {
    // the common case without trusted proxies: Node's text of an IPv4 peer is already canonical
    if (this.trusted.length === 0 && peer !== undefined && peer.indexOf(':') === -1) return peer;
    const ip = this.address(peer, xff);
    return ip ? this.group(ip) : '';
  }

  /** The client address as text (trusted proxies applied, not grouped): what the access log records. */
  text(peer: string | undefined, xff: string | string[] | undefined): string {
    if (this.trusted.length === 0 && peer !== undefined && peer.indexOf(':') === -1) return peer;
    const ip = this.address(peer, xff);
    return ip ? formatIp(ip) : (peer ?? '');
  }

  /** An address's identity (see `of`). */
  group(ip: Ip): string {
    return groupOf(ip, this.ipv6Prefix);
  }
}
