/**
 * The sentinel variant's overshoot bound: admitted ≤ rate + the requests that arrive while one log
 * write is in flight. Requests arrive in waves of k concurrent ones; each wave starts after the previous
 * wave's background writes landed, so at most one wave overlaps the write that reaches the limit:
 * admitted ≤ rate + k − 1, and after that wave nothing is admitted for `per`.
 */
import { ManualClock } from '../../../lib/clock.js';
import { storeKeys } from '../../../contract/store-keys.js';
import { RedisSentinel } from '../../../limiters/sentinel.js';
import { twoGateways, unreachable, type Gateways } from './gateways.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { redisUrl } from '../../helpers/redis.js';
import { sentinelCases } from '../../unit/engine/sentinel-cases.js';

const T0 = 1_700_000_040_000;

let client: StoreClient;
beforeAll(() => {
  client = createStoreClient(redisUrl(), { maxRetriesPerRequest: 1 });
});
afterAll(() => client.disconnect());

sentinelCases('Redis', (clock, onSmoothing) => {
  const s = new RedisSentinel(client, clock, { smoothingEnabled: true }, onSmoothing);
  return { limiter: s, settle: () => s.settled() };
});

describe('sentinel variant in Redis', () => {
  let g: Gateways;
  beforeAll(async () => {
    g = await twoGateways();
  });
  afterAll(() => g.close());

  for (const k of [1, 10, 25]) {
    test(`overshoot bound with two gateways, waves of ${k}: admitted ≤ rate + ${k} − 1, then none`, async () => {
      const clock = new ManualClock(T0);
      const a = new RedisSentinel(g.a, clock, { smoothingEnabled: true });
      const b = new RedisSentinel(g.b, clock, { smoothingEnabled: true });
      const limit = { rate: 50, per: 60 };
      const bucket = `waves-${k}`;
      const perWave: number[] = [];
      for (let w = 0; w < Math.ceil(200 / k); w++) {
        const rs = await Promise.all(Array.from({ length: k }, (_, i) => (i % 2 ? b : a).check(bucket, limit)));
        perWave.push(rs.filter((r) => r.allowed).length);
        await Promise.all([a.settled(), b.settled()]);
      }
      const admitted = perWave.reduce((x, y) => x + y, 0);
      expect(admitted).toBeGreaterThanOrEqual(50);
      expect(admitted).toBeLessThanOrEqual(50 + k - 1);
      // once a wave has crossed the limit, every later wave is refused outright
      const crossing = perWave.findIndex((_, i) => perWave.slice(0, i + 1).reduce((x, y) => x + y, 0) >= 50);
      expect(perWave.slice(crossing + 1).every((n) => n === 0)).toBe(true);
    });
  }

  test('a burst whose reads all come back before the first log write: one gateway admits exactly the allowance, two at most twice it', async () => {
    const clock = new ManualClock(T0);
    const a = new RedisSentinel(g.a, clock, { smoothingEnabled: true });
    const b = new RedisSentinel(g.b, clock, { smoothingEnabled: true });
    const limit = { rate: 5, per: 60 };
    // 50 concurrent checks on one gateway: every sentinel read is answered before any log write lands
    // (before the in-flight cap, all 50 were admitted)
    const one = await Promise.all(Array.from({ length: 50 }, () => a.check('burst-1', limit)));
    expect(one.filter((r) => r.allowed).length).toBe(5);
    expect(one.filter((r) => r.allowed).map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0]);
    expect(one.filter((r) => !r.allowed).every((r) => r.retryAfter === 60)).toBe(true);
    await a.settled();
    expect(Number(await g.a.get(storeKeys.sentinel('burst-1')))).toBe(T0 + 60_000);
    expect((await a.check('burst-1', limit)).allowed).toBe(false);
    // two gateways: each admits at most one allowance in flight
    const two = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? b : a).check('burst-2', limit)));
    const admitted = two.filter((r) => r.allowed).length;
    expect(admitted).toBeGreaterThanOrEqual(5);
    expect(admitted).toBeLessThanOrEqual(10);
    await Promise.all([a.settled(), b.settled()]);
    expect((await b.check('burst-2', limit)).allowed).toBe(false);
  });

  test('a sentinel read answered after the writes that reached the limit (it says "no sentinel") is still refused, until that window ends', async () => {
    const clock = new ManualClock(T0);
    const s = new RedisSentinel(g.a, clock, { smoothingEnabled: true });
    const limit = { rate: 3, per: 10 };
    for (let i = 0; i < 3; i++) expect((await s.check('stale', limit)).allowed).toBe(true);
    await s.settled();
    // what a read sent before the sentinel was written sees: no sentinel (deleted here to stand for it)
    await g.a.del(storeKeys.sentinel('stale'));
    clock.advance(1000);
    const r = await s.check('stale', limit);
    expect(r.allowed).toBe(false);
    expect(r.reset).toBe(Math.ceil((T0 + 10_000) / 1000));
    clock.set(T0 + 10_000);
    expect((await s.check('stale', limit)).allowed).toBe(true);
  });

  test('with smoothing, X-RateLimit-Limit is the smoothed allowance, not the rate: a claim reports its own answer’s', async () => {
    const clock = new ManualClock(T0);
    let allowance: number | undefined;
    const s = new RedisSentinel(g.a, clock, { smoothingEnabled: true }, (_e, a) => (allowance = a));
    // threshold 4: no spare (⌊1.1 × 4⌋ = 4), so every request is a claim the store decides
    const limit = { rate: 20, per: 10, smoothing: { enabled: true, threshold: 4, step: 4, trigger: 0.5, delay: 0 } };
    const limits: number[] = [];
    const expected: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await s.check('smooth', limit);
      limits.push(r.limit);
      await s.settled();
      expected.push(allowance ?? 4);
      clock.advance(10);
    }
    // each request reports the allowance its own claim was decided against (it said 20, the rate)
    expect(limits).toEqual(expected);
    expect(Math.max(...limits)).toBeLessThan(20);
  });

  test('with smoothing, the requests the sentinel refuses are recorded for one window (smoothing’s R); an unsmoothed limit records none', async () => {
    const clock = new ManualClock(T0);
    const s = new RedisSentinel(g.a, clock, { smoothingEnabled: true });
    const limit = { rate: 12, per: 2, smoothing: { enabled: true, threshold: 3, step: 3, trigger: 0.5, delay: 1 } };
    for (let i = 0; i < 60; i++) {
      await s.check('steady-smooth', limit);
      await s.settled();
      clock.advance(167);
    }
    expect(await g.a.zcard(storeKeys.unlogged('steady-smooth'))).toBeGreaterThan(0); // the refusals recorded
    expect(await g.a.pttl(storeKeys.unlogged('steady-smooth'))).toBeLessThanOrEqual(2000); // kept one window
    // an unsmoothed limit records nothing
    for (let i = 0; i < 20; i++) await s.check('plain', { rate: 3, per: 2 });
    await s.settled();
    expect(await g.a.exists(storeKeys.unlogged('plain'))).toBe(0);
  });

  test('a failed background write is counted, never thrown at the request; a failed claim rejects (kv_failure_mode decides)', async () => {
    const errors: Error[] = [];
    const clock = new ManualClock(T0);
    const good = new RedisSentinel(g.a, clock, { smoothingEnabled: true }, undefined, (e) => errors.push(e));
    const limit = { rate: 50, per: 60 };
    // the first request is a claim and brings a spare lease; the next is admitted on its read, logged in the background
    expect((await good.check('wrongtype', limit)).allowed).toBe(true);
    // make the log key the wrong type: the script errors in the background
    await g.a.del(storeKeys.log('wrongtype'));
    await g.a.set(storeKeys.log('wrongtype'), 'x');
    expect((await good.check('wrongtype', limit)).allowed).toBe(true);
    await good.settled();
    expect(errors).toHaveLength(1);
    // a gateway without a lease asks the store: the error is the request's (select.ts wraps it in kv_failure_mode)
    const cold = new RedisSentinel(g.a, clock, { smoothingEnabled: true });
    await expect(cold.check('wrongtype', limit)).rejects.toThrow(/WRONGTYPE/);
    const dead = unreachable();
    const s = new RedisSentinel(dead, clock, { smoothingEnabled: true });
    await expect(s.check('x', { rate: 5, per: 60 })).rejects.toThrow(); // the store call fails: kv_failure_mode decides (select.ts)
    dead.disconnect();
  });
});
