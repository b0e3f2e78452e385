import { ManualClock } from '../../../lib/clock.js';
import { storeKeys } from '../../../contract/store-keys.js';
import { RedisSlidingLog } from '../../../limiters/sliding-log.js';
import type { SmoothingEvent } from '../../../limiters/types.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { redisUrl } from '../../helpers/redis.js';
import { burst, twoGateways, type Gateways } from './gateways.js';
import { CURVE_EVENTS, CURVE_LIMIT, driveCurve } from '../../unit/engine/fixtures.js';
import { slidingLogCases } from '../../unit/engine/sliding-log-cases.js';

const T0 = 1_700_000_040_000;

let client: StoreClient;
beforeAll(() => {
  client = createStoreClient(redisUrl(), { maxRetriesPerRequest: 1 });
});
afterAll(() => client.disconnect());

// the behaviour table the memory log passes, through the script and through the pipeline without MULTI
for (const transactional of [true, false])
  slidingLogCases(`Redis, ${transactional ? 'script' : 'pipeline'}`, (clock, o) => {
    const opts = { transactional, smoothingEnabled: o.smoothingEnabled ?? true };
    return new RedisSlidingLog(client, clock, opts, o.onSmoothing);
  });

describe('sliding window log in Redis', () => {
  let g: Gateways;
  beforeAll(async () => {
    g = await twoGateways();
  });
  afterAll(() => g.close());

  for (const transactional of [true, false]) {
    const variant = transactional ? 'script (EVALSHA)' : 'pipeline without MULTI';
    test(`${variant}: 200 concurrent checks from two gateways for rate 50 → 50 admitted (never more)`, async () => {
      const clock = new ManualClock(T0);
      const opts = { transactional, smoothingEnabled: true };
      const a = new RedisSlidingLog(g.a, clock, opts);
      const b = new RedisSlidingLog(g.b, clock, opts);
      const limit = { rate: 50, per: 60 };
      const bucket = `conc-${transactional}`;
      const admitted = await burst(
        200,
        () => a.check(bucket, limit),
        () => b.check(bucket, limit),
      );
      if (transactional) expect(admitted).toBe(50);
      else {
        // counting after the add: interleaved pipelines may refuse a little too much, never admit too much
        expect(admitted).toBeLessThanOrEqual(50);
        expect(admitted).toBeGreaterThanOrEqual(45);
      }
      // every request entered the log, refused ones included, each as its own member
      expect(await g.a.zcard(storeKeys.log(bucket))).toBe(200);
    });
  }

  test('the keys of one bucket share a hash tag', () => {
    const tags = [storeKeys.log('k:h:x'), storeKeys.smoothing('k:h:x'), storeKeys.sentinel('k:h:x')].map(
      (k) => /\{[^}]*\}/.exec(k)![0],
    );
    expect(new Set(tags)).toEqual(new Set(['{k:h:x}']));
    expect(storeKeys.log('odd{bucket}')).toBe('gw:{odd%7Bbucket%7D}:log');
    // escaped, not replaced: buckets that differ never share a key
    const distinct = ['p:acme{X}', 'p:acme_X_', 'p:acme%7BX%7D', 'p:acme%X'].map((b) => storeKeys.log(b));
    expect(new Set(distinct).size).toBe(4);
    for (const k of distinct) expect(k.match(/[{}]/g)).toEqual(['{', '}']);
  });

  test('smoothing: the allowance is shared through the store by every gateway', async () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const opts = { transactional: true, smoothingEnabled: true };
    const a = new RedisSlidingLog(g.a, clock, opts, (e) => events.push(e));
    const b = new RedisSlidingLog(g.b, clock, opts, (e) => events.push(e));
    const limit = { rate: 20, per: 60, smoothing: { enabled: true, threshold: 5, step: 5, trigger: 0.5, delay: 10 } };
    // gateway A sees 3 requests: the third lifts the allowance 5 → 10
    for (let i = 0; i < 3; i++) await a.check('sm', limit);
    expect(events.map((e) => [e.event, e.oldAllowance, e.newAllowance])).toEqual([['RateLimitSmoothingUp', 5, 10]]);
    // gateway B admits up to the shared 10, not its own threshold of 5
    const onB = [];
    for (let i = 0; i < 8; i++) onB.push(await b.check('sm', limit));
    expect(onB.filter((r) => r.allowed).length).toBe(7);
    expect(onB[7]!.limit).toBe(10);
    expect(await g.a.hget(storeKeys.smoothing('sm'), 'a')).toBe('10');
    expect(events).toHaveLength(1); // the hold-off is shared too
  });

  test('smoothing: the scripted request-rate curve gives the same steps, events and hold-offs in the Lua script, across two gateways', async () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const opts = { transactional: true, smoothingEnabled: true };
    const a = new RedisSlidingLog(g.a, clock, opts, (e) => events.push(e));
    const b = new RedisSlidingLog(g.b, clock, opts, (e) => events.push(e));
    let i = 0;
    const got = await driveCurve(() => (i++ % 2 ? b : a).check('curve', CURVE_LIMIT), clock, events);
    expect(got.events).toEqual(CURVE_EVENTS);
    expect(Math.max(...got.allowance)).toBe(16);
    expect(got.allowance.at(-1)).toBe(4);
  });
});
