/** The gateway configuration file's algorithm flags (docs/contract.md#gateway-configuration): which one runs, which are ignored. */
import { GatewayOptions, ignoredAlgorithmFlags, loadGatewayOptions, selectedAlgorithm } from '../../lib/options.js';

test.each([
  [{}, 'drl', []],
  [{ enable_kv_rolling_limiter: true }, 'sliding_log', []],
  [{ enable_kv_rolling_limiter: true, enable_sentinel_rate_limiter: true }, 'sentinel', []],
  [{ enable_fixed_window_rate_limiter: true }, 'fixed_window', []],
  [
    { enable_fixed_window_rate_limiter: true, enable_sentinel_rate_limiter: true },
    'fixed_window',
    ['enable_sentinel_rate_limiter'],
  ],
  [
    {
      enable_fixed_window_rate_limiter: true,
      enable_kv_rolling_limiter: true,
      enable_non_transactional_rate_limiter: true,
    },
    'fixed_window',
    ['enable_kv_rolling_limiter', 'enable_non_transactional_rate_limiter'],
  ],
])('%j → %s, ignoring %j', (flags, algorithm, ignored) => {
  const o = GatewayOptions.parse(flags);
  expect(selectedAlgorithm(o)).toBe(algorithm);
  expect(ignoredAlgorithmFlags(o)).toEqual(ignored);
});

test('the store deadline defaults to 1 s', () => {
  expect(GatewayOptions.parse({}).kv_deadline_ms).toBe(1000);
});

test('credentials lose surrounding whitespace (a secret file ends in a newline; header values never carry it)', () => {
  expect(loadGatewayOptions(undefined, { GW_SECRET: 'sek3\n', GW_ACCESS_TOKENS: ' tokC\n, tokD ' })).toMatchObject({
    secret: 'sek3',
    access_tokens: ['tokC', 'tokD'],
  });
  expect(loadGatewayOptions(undefined, { GW_SECRET: ' \n' }).secret).toBeUndefined();
  expect(GatewayOptions.parse({ secret: ' s \n', access_tokens: ['t\n'] })).toMatchObject({
    secret: 's',
    access_tokens: ['t'],
  });
});
