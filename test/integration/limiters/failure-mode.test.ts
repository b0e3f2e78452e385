import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions } from '../../../lib/options.js';
import { createEngine } from '../../../sidecar/engine/engine.js';
import { storeKeys } from '../../../contract/store-keys.js';
import { freshRedis } from '../../helpers/redis.js';
import { unreachable } from './gateways.js';
import { api as mkApi, T0 } from '../../unit/engine/fixtures.js';

const api = mkApi('a', { apiLimit: { rate: 5, per: 60 } });
const session = { namespace: 'default', session: { rate: 5, per: 60, quota_max: 10, quota_renewal_rate: 60 } };

describe('kv_failure_mode with the store unreachable', () => {
  const algorithms = [
    { enable_kv_rolling_limiter: true },
    { enable_sentinel_rate_limiter: true },
    { enable_fixed_window_rate_limiter: true },
    { enable_kv_rolling_limiter: true, enable_non_transactional_rate_limiter: true },
  ];

  for (const algo of algorithms) {
    const name = Object.keys(algo).join('+');
    test(`${name}: open admits and counts store errors; closed refuses`, async () => {
      const redis = unreachable();
      const errors: Error[] = [];
      const mk = (mode: 'open' | 'closed') =>
        createEngine({
          options: GatewayOptions.parse({ ...algo, kv_failure_mode: mode }),
          clock: new ManualClock(T0),
          config: () => ({ hash: '', apis: [], policies: {} }),
          redis,
          onStoreError: (e) => errors.push(e),
        });
      const open = mk('open');
      const v = await open.check({ api, method: 'GET', path: '/', keyHash: 'k', session });
      expect(v.kind).toBe('allow');
      expect(errors.length).toBe(3); // API limit, key limit, quota
      const closed = mk('closed');
      const w = await closed.check({ api, method: 'GET', path: '/', keyHash: 'k', session });
      expect(w.kind).toBe('unavailable'); // a 503, never the 429 of a real limit
      expect(w.kind !== 'allow' && w.retryAfter).toBe(1);
      redis.disconnect();
    });
  }

  test('closed: a quota that cannot be read refuses as unavailable (503), not as an exceeded quota', async () => {
    const redis = unreachable();
    const e = createEngine({
      options: GatewayOptions.parse({ enable_kv_rolling_limiter: true, kv_failure_mode: 'closed' }),
      clock: new ManualClock(T0),
      config: () => ({ hash: '', apis: [], policies: {} }),
      redis,
    });
    // only a quota, no rate limits: the quota store decides
    const v = await e.check({
      api: { ...api, apiLimit: undefined },
      method: 'GET',
      path: '/',
      keyHash: 'k',
      session: { namespace: 'default', session: { quota_max: 10, quota_renewal_rate: 60 } },
    });
    expect(v.kind).toBe('unavailable');
    redis.disconnect();
  });

  test('bad store content (a limiter or quota key of another type) follows the failure mode once, then the bucket is repaired', async () => {
    const redis = await freshRedis();
    const repaired: string[] = [];
    const errors: Error[] = [];
    const e = createEngine({
      options: GatewayOptions.parse({ enable_kv_rolling_limiter: true, kv_failure_mode: 'closed' }),
      clock: new ManualClock(T0),
      config: () => ({ hash: '', apis: [], policies: {} }),
      redis,
      onStoreError: (err) => errors.push(err),
      onStoreRepair: (b) => repaired.push(b),
    });
    const req = { api, method: 'GET', path: '/', keyHash: 'k', session };
    await redis.set(storeKeys.log('a:default/a'), 'garbage'); // the API limit's log, as a string
    expect((await e.check(req)).kind).toBe('unavailable'); // closed: refused (503), Retry-After 1
    expect(errors[0]?.message).toMatch(/^WRONGTYPE/);
    expect(repaired).toEqual(['a:default/a']);
    await new Promise((r) => setTimeout(r, 50));
    expect(await redis.exists(storeKeys.log('a:default/a'))).toBe(0);
    expect((await e.check(req)).kind).toBe('allow'); // the bucket starts afresh
    // the quota's key of another type: the same
    const quotaKey = storeKeys.quota('q:h:k');
    expect(await redis.type(quotaKey)).toBe('hash');
    await redis.set(quotaKey, 'garbage');
    expect((await e.check(req)).kind).toBe('unavailable');
    expect(repaired).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 50));
    expect((await e.check(req)).kind).toBe('allow');
    redis.disconnect();
  });
});
