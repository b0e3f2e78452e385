/**
 * IP addresses and CIDR blocks, parsed by hand (no allocation beyond the result): what the client-address
 * rules need (lib/ip/client-address.ts). An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is the IPv4
 * address: Node reports IPv4 peers of a dual-stack listener in that form.
 */

/** IPv4 as an unsigned 32-bit number; IPv6 as its eight 16-bit groups. */
export type Ip = { v: 4; n: number } | { v: 6; g: Uint16Array };

export interface Cidr {
  v: 4 | 6;
  /** The network address (host bits zero). */
  ip: Ip;
  prefix: number;
}

function parseV4(s: string, from: number, to: number): number | undefined {
  let n = 0;
  let parts = 0;
  let i = from;
  while (i < to) {
    let part = 0;
    const start = i;
    while (i < to) {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) break;
      part = part * 10 + (c - 48);
      i++;
    }
    const len = i - start;
    // 1–3 digits, no leading zero (010 is octal to some parsers, decimal to others: refused)
    if (len === 0 || len > 3 || part > 255 || (len > 1 && s.charCodeAt(start) === 48)) return undefined;
    n = n * 256 + part;
    parts++;
    if (i === to) break;
    if (s.charCodeAt(i) !== 46 /* . */ || parts === 4) return undefined;
    i++;
    if (i === to) return undefined; // trailing dot
  }
  return parts === 4 ? n : undefined;
}

function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

function parseV6(s: string, from: number, to: number): Uint16Array | undefined {
  const g = new Uint16Array(8);
  let count = 0;
  let gap = -1; // index in g where '::' stands
  let i = from;
  if (to - from < 2) return undefined;
  if (s.charCodeAt(i) === 58 /* : */) {
    if (s.charCodeAt(i + 1) !== 58) return undefined; // a lone leading ':'
    gap = 0;
    i += 2;
    if (i === to) return g; // '::'
  }
  while (i < to) {
    if (count === 8) return undefined;
    // an embedded IPv4 tail (::ffff:1.2.3.4, 64:ff9b::1.2.3.4) takes the last two groups
    let j = i;
    let dot = false;
    while (j < to && s.charCodeAt(j) !== 58) {
      if (s.charCodeAt(j) === 46) dot = true;
      j++;
    }
    if (dot) {
      if (j !== to || count > 6) return undefined;
      const v4 = parseV4(s, i, to);
      if (v4 === undefined) return undefined;
      g[count++] = v4 >>> 16;
      g[count++] = v4 & 0xffff;
      break;
    }
    const len = j - i;
    if (len === 0 || len > 4) return undefined;
    let v = 0;
    for (let k = i; k < j; k++) {
      const d = hexDigit(s.charCodeAt(k));
      if (d < 0) return undefined;
      v = v * 16 + d;
    }
    g[count++] = v;
    i = j;
    if (i === to) break;
    // i is at ':'
    i++;
    if (i === to) return undefined; // trailing single ':'
    if (s.charCodeAt(i) === 58) {
      if (gap !== -1) return undefined; // a second '::'
      gap = count;
      i++;
      if (i === to) break; // trailing '::'
    }
  }
  if (gap === -1) return count === 8 ? g : undefined;
  if (count === 8) return undefined; // '::' must stand for at least one group
  // move the groups after the gap to the end
  const tail = count - gap;
  for (let k = 0; k < tail; k++) {
    g[7 - k] = g[count - 1 - k]!;
    g[count - 1 - k] = 0;
  }
  for (let k = gap; k < 8 - tail; k++) g[k] = 0;
  return g;
}

/** `::ffff:a.b.c.d` (groups 0–4 zero, group 5 0xffff): the IPv4 address, else undefined. */
function mappedV4(g: Uint16Array): number | undefined {
  if (g[0] || g[1] || g[2] || g[3] || g[4] || g[5] !== 0xffff) return undefined;
  return g[6]! * 65536 + g[7]!;
}

/**
 * A bare address (no brackets, no port): IPv4 dotted quad or IPv6 text. A zone (`fe80::1%eth0`) is
 * dropped. IPv4-mapped IPv6 is returned as IPv4. Undefined when `s` is not an address.
 */
export function parseIp(s: string, from = 0, to = s.length): Ip | undefined {
  let colon = false;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c === 58) colon = true;
    else if (c === 37 /* % */) {
      if (!colon || i === to - 1) return undefined;
      to = i; // the zone
      break;
    }
  }
  if (!colon) {
    const n = parseV4(s, from, to);
    return n === undefined ? undefined : { v: 4, n };
  }
  const g = parseV6(s, from, to);
  if (!g) return undefined;
  const m = mappedV4(g);
  return m === undefined ? { v: 6, g } : { v: 4, n: m };
}

/** The groups of an IPv4 address as IPv4-mapped IPv6 (for IPv6 blocks that contain the mapped range). */
function asMapped(n: number): Uint16Array {
  const g = new Uint16Array(8);
  g[5] = 0xffff;
  g[6] = n >>> 16;
  g[7] = n & 0xffff;
  return g;
}

/** Whether the first `prefix` bits of two group arrays are equal. */
function samePrefix(a: Uint16Array, b: Uint16Array, prefix: number): boolean {
  let bits = prefix;
  for (let k = 0; k < 8 && bits > 0; k++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if ((a[k]! & mask) !== (b[k]! & mask)) return false;
  }
  return true;
}

function ipEquals(a: Ip, b: Ip): boolean {
  if (a.v === 4) return b.v === 4 && a.n === b.n;
  return b.v === 6 && samePrefix(a.g, b.g, 128);
}

const v4Mask = (prefix: number): number => (prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0);

/** The address with every bit after `prefix` cleared. */
export function maskIp(ip: Ip, prefix: number): Ip {
  if (ip.v === 4) return { v: 4, n: (ip.n & v4Mask(prefix)) >>> 0 };
  const g = new Uint16Array(8);
  let bits = prefix;
  for (let k = 0; k < 8; k++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : bits <= 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
    g[k] = ip.g[k]! & mask;
  }
  return { v: 6, g };
}

/**
 * `a.b.c.d/n`, `v6/n`, or a bare address (a block of one: /32, /128). Returns an error message for
 * anything else: the caller names the field. A block with host bits set (`10.0.0.1/8`) is refused, as
 * it most likely says something other than what was meant.
 */
export function parseCidr(text: string): Cidr | string {
  const s = text.trim();
  const slash = s.indexOf('/');
  const ip = parseIp(s, 0, slash === -1 ? s.length : slash);
  if (!ip || (slash !== -1 && s.includes('%')))
    return `${JSON.stringify(text)} is not an IP address or CIDR block (such as 10.0.0.0/8 or fd00::/8)`;
  // an IPv4-mapped block (::ffff:10.0.0.0/104) is the IPv4 block (10.0.0.0/8)
  const mappedText = ip.v === 4 && s.slice(0, slash === -1 ? s.length : slash).includes(':');
  const max = ip.v === 4 ? 32 : 128;
  let prefix = max;
  if (slash !== -1) {
    const p = s.slice(slash + 1);
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return `${JSON.stringify(text)}: the prefix length must be a number`;
    prefix = Number(p) - (mappedText ? 96 : 0);
    if (prefix < 0 || prefix > max)
      return `${JSON.stringify(text)}: the prefix length must be 0–${max} for IPv${ip.v}${mappedText ? ' (96–128 for an IPv4-mapped block)' : ''}`;
  }
  const net = maskIp(ip, prefix);
  if (!ipEquals(net, ip))
    return `${JSON.stringify(text)} has bits set after the prefix length (the block is ${formatCidr({ v: ip.v, ip: net, prefix })})`;
  return { v: ip.v, ip: net, prefix };
}

export function cidrContains(c: Cidr, ip: Ip): boolean {
  if (c.ip.v === 4) return ip.v === 4 && (ip.n & v4Mask(c.prefix)) >>> 0 === c.ip.n;
  // an IPv6 block holds IPv4 addresses when it covers their mapped form (::/0, ::ffff:0:0/96)
  return samePrefix(c.ip.g, ip.v === 6 ? ip.g : asMapped(ip.n), c.prefix);
}

const v4Text = (n: number): string => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;

/** RFC 5952 text: lower-case hex, the longest run (≥ 2) of zero groups as `::`. */
export function formatIp(ip: Ip): string {
  if (ip.v === 4) return v4Text(ip.n);
  const g = ip.g;
  let best = -1;
  let bestLen = 1;
  for (let k = 0; k < 8;) {
    if (g[k] !== 0) {
      k++;
      continue;
    }
    let e = k;
    while (e < 8 && g[e] === 0) e++;
    if (e - k > bestLen) {
      best = k;
      bestLen = e - k;
    }
    k = e;
  }
  const hex = (from: number, to: number): string => {
    let out = '';
    for (let k = from; k < to; k++) out += (k > from ? ':' : '') + g[k]!.toString(16);
    return out;
  };
  if (best === -1) return hex(0, 8);
  return `${hex(0, best)}::${hex(best + bestLen, 8)}`;
}

export function formatCidr(c: Cidr): string {
  return `${formatIp(c.ip)}/${c.prefix}`;
}
