/**
 * The client address of a request (docs/contract.md#limit-by): IP and CIDR parsing, X-Forwarded-For walking over
 * trusted proxies, IPv6 grouping, IPv4-mapped IPv6 as IPv4.
 */
import { cidrContains, formatIp, parseCidr, parseIp, type Cidr } from '../../../lib/ip/address.js';
import { ClientAddresses, parseForwardedEntry } from '../../../lib/ip/client-address.js';

const text = (s: string): string | undefined => {
  const ip = parseIp(s);
  return ip && formatIp(ip);
};

describe('parseIp', () => {
  test.each([
    ['1.2.3.4', '1.2.3.4'],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['::', '::'],
    ['::1', '::1'],
    ['2001:db8::1', '2001:db8::1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // the first of two equal runs
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'], // the longest run
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2:3:4:5:6'],
    ['2001:db8:0:1:2:3:4:5', '2001:db8:0:1:2:3:4:5'], // a single zero group is not compressed
    ['1::', '1::'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
    ['fe80::1%eth0', 'fe80::1'], // zone dropped
    ['::ffff:1.2.3.4', '1.2.3.4'], // IPv4-mapped = IPv4
    ['::FFFF:7f00:2', '127.0.0.2'], // mapped, in hex
    ['::ffff:0:1.2.3.4', '::ffff:0:102:304'], // IPv4-translated (RFC 2765) is not mapped
    ['64:ff9b::1.2.3.4', '64:ff9b::102:304'],
    ['::1.2.3.4', '::102:304'],
  ])('%s → %s', (input, out) => expect(text(input)).toBe(out));

  test.each([
    '',
    '1.2.3',
    '1.2.3.4.5',
    '1.2.3.256',
    '01.2.3.4', // leading zero
    '1.2.3.4.',
    '.1.2.3.4',
    '1..3.4',
    ' 1.2.3.4',
    '1.2.3.4 ',
    'a.b.c.d',
    '1.2.3.4%eth0',
    ':',
    ':::',
    ':1',
    '1:',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '12345::1',
    'g::1',
    '1:2:3:4:5:6:7',
    '::ffff:1.2.3',
    '::ffff:1.2.3.4:5',
    '1:2:3:4:5:6:7:1.2.3.4',
    'fe80::1%',
    'unknown',
    '[::1]',
  ])('%j is no address', (input) => expect(parseIp(input)).toBeUndefined());
});

describe('parseCidr and cidrContains', () => {
  const cidr = (s: string): Cidr => {
    const c = parseCidr(s);
    if (typeof c === 'string') throw new Error(c);
    return c;
  };
  const has = (block: string, addr: string): boolean => cidrContains(cidr(block), parseIp(addr)!);

  test('IPv4 blocks', () => {
    expect(has('10.0.0.0/8', '10.255.1.2')).toBe(true);
    expect(has('10.0.0.0/8', '11.0.0.0')).toBe(false);
    expect(has('192.168.1.0/24', '192.168.1.255')).toBe(true);
    expect(has('192.168.1.0/24', '192.168.2.0')).toBe(false);
    expect(has('0.0.0.0/0', '203.0.113.9')).toBe(true);
    expect(has('127.0.0.2', '127.0.0.2')).toBe(true); // a bare address is a block of one
    expect(has('127.0.0.2', '127.0.0.3')).toBe(false);
    expect(has('128.0.0.0/1', '200.0.0.1')).toBe(true);
    expect(has('128.0.0.0/1', '100.0.0.1')).toBe(false);
    expect(has('10.0.0.0/8', '::ffff:10.1.2.3')).toBe(true); // mapped = IPv4
    expect(has('10.0.0.0/8', '2001:db8::1')).toBe(false);
  });

  test('IPv6 blocks', () => {
    expect(has('2001:db8::/32', '2001:db8:ffff::1')).toBe(true);
    expect(has('2001:db8::/32', '2001:db9::1')).toBe(false);
    expect(has('2001:db8::/63', '2001:db8:0:1:ffff::')).toBe(true);
    expect(has('2001:db8::/63', '2001:db8:0:2::')).toBe(false);
    expect(has('fd00::/8', 'fdff::1')).toBe(true);
    expect(has('::1', '::1')).toBe(true);
    expect(has('::/0', '2001:db8::1')).toBe(true);
    // an IPv6 block holds IPv4 addresses only through their mapped form
    expect(has('::ffff:0:0/96', '1.2.3.4')).toBe(true);
    expect(has('::/0', '1.2.3.4')).toBe(true);
    expect(has('2001:db8::/32', '1.2.3.4')).toBe(false);
    expect(has('::ffff:10.0.0.0/104', '10.9.9.9')).toBe(true); // mapped block = 10.0.0.0/8
    expect(has('::ffff:10.0.0.0/104', '11.0.0.0')).toBe(false);
  });

  test.each([
    ['10.0.0.1/8', /bits set after the prefix length \(the block is 10\.0\.0\.0\/8\)/],
    ['2001:db8::1/64', /the block is 2001:db8::\/64/],
    ['10.0.0.0/33', /0–32 for IPv4/],
    ['2001:db8::/129', /0–128 for IPv6/],
    ['::ffff:10.0.0.0/90', /96–128 for an IPv4-mapped block/],
    ['10.0.0.0/', /prefix length must be a number/],
    ['10.0.0.0/08', /prefix length must be a number/],
    ['10.0.0.0/-1', /prefix length must be a number/],
    ['10.0.0.0/8/8', /prefix length must be a number/],
    ['localhost', /not an IP address or CIDR block/],
    ['', /not an IP address/],
    ['fe80::%eth0/64', /not an IP address/],
  ])('%j is refused', (input, message) => expect(parseCidr(input)).toMatch(message));

  test('spaces around a block are ignored', () => expect(has(' 10.0.0.0/8 ', '10.0.0.1')).toBe(true));
});

describe('parseForwardedEntry', () => {
  const entry = (s: string): string | undefined => {
    const ip = parseForwardedEntry(s);
    return ip && formatIp(ip);
  };
  test.each([
    ['1.2.3.4', '1.2.3.4'],
    ['  1.2.3.4\t', '1.2.3.4'],
    ['1.2.3.4:8080', '1.2.3.4'],
    ['"1.2.3.4"', '1.2.3.4'],
    ['2001:db8::1', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['[2001:db8::1]:443', '2001:db8::1'],
    ['"[2001:db8::1]:443"', '2001:db8::1'],
    ['[::ffff:1.2.3.4]:80', '1.2.3.4'],
    ['::ffff:1.2.3.4', '1.2.3.4'],
    ['fe80::1%eth0', 'fe80::1'],
  ])('%j → %s', (input, out) => expect(entry(input)).toBe(out));

  test.each([
    '',
    '   ',
    'unknown',
    '_hidden',
    '1.2.3.4:',
    '1.2.3.4:http',
    '1.2.3.4:123456',
    '[2001:db8::1',
    '[2001:db8::1]x',
    '[2001:db8::1]:',
    '[1.2.3.4]',
    '[1.2.3.4]:80',
    'garbage:80',
    '2001:db8::1:',
    '"1.2.3.4',
    '1.2.3.4, 5.6.7.8',
  ])('%j is no address', (input) => expect(entry(input)).toBeUndefined());

  test('reads only its own range of a header', () => {
    const h = '1.2.3.4:80, ::1';
    expect(formatIp(parseForwardedEntry(h, 0, 10)!)).toBe('1.2.3.4');
    expect(formatIp(parseForwardedEntry(h, 11)!)).toBe('::1');
  });
});

describe('ClientAddresses', () => {
  const proxies = new ClientAddresses(['10.0.0.0/8', '2001:db8:ffff::/48', '127.0.0.5']);
  const none = new ClientAddresses([]);

  test('without trusted proxies: the peer, whatever the header says', () => {
    expect(none.of('203.0.113.7', '198.51.100.1')).toBe('203.0.113.7');
    expect(none.of('::ffff:203.0.113.7', '198.51.100.1')).toBe('203.0.113.7');
    expect(none.of('10.1.1.1', '198.51.100.1')).toBe('10.1.1.1');
  });

  test('an untrusted peer: its X-Forwarded-For changes nothing', () => {
    expect(proxies.of('203.0.113.7', '198.51.100.1')).toBe('203.0.113.7');
    expect(proxies.of('203.0.113.7', '10.0.0.1')).toBe('203.0.113.7');
    expect(proxies.of('127.0.0.6', '198.51.100.1')).toBe('127.0.0.6');
  });

  test('a trusted peer: the rightmost entry that is not a trusted proxy', () => {
    expect(proxies.of('10.0.0.1', '198.51.100.1')).toBe('198.51.100.1');
    expect(proxies.of('127.0.0.5', '198.51.100.1')).toBe('198.51.100.1');
    expect(proxies.of('::ffff:10.0.0.1', '198.51.100.1')).toBe('198.51.100.1');
    // the client forged entries on the left; the trusted proxies appended the real one
    expect(proxies.of('10.0.0.1', '1.1.1.1, 2.2.2.2, 198.51.100.1, 10.9.9.9')).toBe('198.51.100.1');
    expect(proxies.of('10.0.0.1', ['1.1.1.1, 198.51.100.1', '10.2.2.2'])).toBe('198.51.100.1');
    expect(proxies.of('10.0.0.1', '198.51.100.1:5555,10.2.2.2')).toBe('198.51.100.1');
    expect(proxies.of('10.0.0.1', ' 198.51.100.1 ,, 10.2.2.2 ,')).toBe('198.51.100.1');
    expect(proxies.of('10.0.0.1', '"[2001:db8:1:2::9]:443"')).toBe('2001:db8:1:2::/64');
    expect(proxies.of('2001:db8:ffff::1', '[2001:db8:1:2::9], 2001:db8:ffff:1::1')).toBe('2001:db8:1:2::/64');
  });

  test('a trusted peer without the header, or with an empty one: the peer', () => {
    expect(proxies.of('10.0.0.1', undefined)).toBe('10.0.0.1');
    expect(proxies.of('10.0.0.1', '')).toBe('10.0.0.1');
    expect(proxies.of('10.0.0.1', ' , ')).toBe('10.0.0.1');
  });

  test('garbage ends the walk at the last trusted hop', () => {
    expect(proxies.of('10.0.0.1', 'garbage')).toBe('10.0.0.1');
    expect(proxies.of('10.0.0.1', '198.51.100.1, unknown')).toBe('10.0.0.1');
    expect(proxies.of('10.0.0.1', '198.51.100.1, unknown, 10.3.3.3')).toBe('10.3.3.3');
    expect(proxies.of('10.0.0.1', '1.2.3.4:http, 10.3.3.3')).toBe('10.3.3.3');
    expect(proxies.of('10.0.0.1', '[2001:db8::1, 10.3.3.3')).toBe('10.3.3.3');
  });

  test('every entry trusted: the leftmost', () => {
    expect(proxies.of('10.0.0.1', '10.0.0.9, 10.0.0.8')).toBe('10.0.0.9');
  });

  test('IPv6 clients are grouped by /ipv6_prefix', () => {
    expect(none.of('2001:db8:1:2:aaaa::1', undefined)).toBe('2001:db8:1:2::/64');
    expect(none.of('2001:db8:1:2:bbbb::2', undefined)).toBe('2001:db8:1:2::/64');
    expect(none.of('2001:db8:1:3::1', undefined)).toBe('2001:db8:1:3::/64');
    const by48 = new ClientAddresses([], 48);
    expect(by48.of('2001:db8:1:2::1', undefined)).toBe('2001:db8:1::/48');
    expect(by48.of('2001:db8:1:ffff::1', undefined)).toBe('2001:db8:1::/48');
    expect(new ClientAddresses([], 128).of('2001:db8::7', undefined)).toBe('2001:db8::7/128');
    expect(new ClientAddresses([], 56).of('2001:db8:1:2ff::1', undefined)).toBe('2001:db8:1:200::/56');
    // IPv4 addresses are never grouped; mapped ones are IPv4
    expect(none.of('::ffff:198.51.100.1', undefined)).toBe('198.51.100.1');
    expect(none.of('::1', undefined)).toBe('::/64');
  });

  test('an unknown peer (socket gone) is the empty identity', () => {
    expect(none.of(undefined, undefined)).toBe('');
    expect(proxies.of(undefined, '1.2.3.4')).toBe('');
  });

  test('a bad trusted proxy is refused, naming it', () => {
    expect(() => new ClientAddresses(['10.0.0.0/8', 'nonsense'])).toThrow(/trusted_proxies: "nonsense" is not an IP/);
  });
});
