/**
 * The group a client address is counted in by per-client bounds (connections per client, the facade's
 * guess limit): an IPv4 address itself; an IPv6 address its /64 (one host is usually given a whole /64,
 * so counting exact addresses would give it 2^64 allowances); an IPv4-mapped IPv6 address
 * (`::ffff:1.2.3.4`, a dual-stack listener) its IPv4 address.
 */
export function addressGroup(address: string | undefined): string {
  if (!address) return 'unknown';
  if (!address.includes(':')) return address;
  const lower = address.toLowerCase().replace(/%.*$/, ''); // zone id (fe80::1%eth0)
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = lower.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups =
    tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g || '0', 16).toString(16))
    .join(':')}::/64`;
}
