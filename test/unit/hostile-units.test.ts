/** Units of the hostile-input rules (docs/contract.md#hostile-input): address groups, the facade's guess budget, method names, strict path forms. */
import { addressGroup } from '../../lib/ip/client-address.js';
import { FacadeLimiter } from '../../facade/rate-limit.js';
import { ClassicEndpointRule } from '../../crds/schemas/api-definition.js';
import { EndpointLimit } from '../../crds/schemas/access-definition.js';
import { strictPathProblem } from '../../lib/request-path.js';
import { GatewayOptions } from '../../lib/options.js';

test.each([
  ['127.0.0.1', '127.0.0.1'],
  ['::ffff:10.1.2.3', '10.1.2.3'],
  ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
  ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
  ['2001:DB8:1:2:ffff::1', '2001:db8:1:2::/64'],
  ['::1', '::/64'],
  ['::ffff:0a01:0203', '10.1.2.3'],
  ['fe80::1%eth0', 'fe80::/64'],
  ['not-an-address:x', 'not-an-address:x'],
  [undefined, 'unknown'],
])('address %s counts in group %s', (address, group) => {
  expect(addressGroup(address)).toBe(group);
});

test('the facade guess budget: past `rate` wrong credentials in a window, a client that guessed wrong waits; others do not', () => {
  let now = 1_000_000;
  const clock = { now: () => now };
  const l = new FacadeLimiter({ rate: 5, per: 1 }, clock);
  for (let i = 0; i < 5; i++) {
    expect(l.take(`10.0.0.${i}`)).toBeUndefined();
    l.failed(`10.0.0.${i}`);
  }
  expect(l.take('10.0.0.1')).toBe(1); // a guesser, budget spent
  expect(l.take('10.0.0.99')).toBeUndefined(); // never guessed wrong
  now += 1000; // a new window
  expect(l.take('10.0.0.1')).toBeUndefined();
});

test('endpoint rule methods are HTTP methods (any case) or *', () => {
  const rule = (method: string) => ClassicEndpointRule.safeParse({ path: '/x', method, rate: 1, per: 1 }).success;
  expect(['GET', 'get', 'Patch', 'DELETE', 'options', '*'].map(rule)).toEqual([true, true, true, true, true, true]);
  expect(['FETCH', 'GETS', '', 'GET ', 'G*'].map(rule)).toEqual([false, false, false, false, false]);
  const ep = (name: string) =>
    EndpointLimit.safeParse({ path: '/x', methods: [{ name, limit: { rate: 1, per: 1 } }] }).success;
  expect([ep('post'), ep('FETCH')]).toEqual([true, false]);
});

test.each([
  ['/files/public/..;/admin/secret', /path parameters/],
  ['/files/public/..\\admin', /backslashes/],
  ['/a/..%5cb', /encoded/],
  ['/a/..%2Fb', /encoded/],
  ['/a/..%2fb', /encoded/],
  ['/users%00', /encoded/],
  ['/users', undefined],
  ['/users/%41%20x', undefined],
])('strict_paths: %s', (path, problem) => {
  const p = strictPathProblem(path);
  if (problem) expect(p).toMatch(problem);
  else expect(p).toBeUndefined();
});

test('the slow-client and connection options have their documented defaults', () => {
  const o = GatewayOptions.parse({});
  expect([o.strict_paths, o.headers_timeout, o.max_connections, o.max_connections_per_client]).toEqual([
    false,
    60,
    4096,
    1024,
  ]);
});
