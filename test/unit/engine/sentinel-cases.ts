/**
 * The sentinel variant's behaviour table for requests one after the other (each request's background log
 * write landed before the next), run against every implementation: memory here
 * (test/unit/engine/sentinel.test.ts) and Redis on one server and on a Redis Cluster
 * (test/integration/limiters/sentinel.test.ts, tables-cluster.test.ts). Concurrent bursts and the
 * overshoot bound are Redis-only (the memory log is written inline, so it has none).
 */
import { ManualClock } from '../../../lib/clock.js';
import type { Limiter, LimitResult, SmoothingEvent, SmoothingListener } from '../../../limiters/types.js';
import type { LimitSpec } from '../../../contract/config.js';
import { steadyUnderSentinel, T0 } from './fixtures.js';

export interface SentinelUnderTest {
  limiter: Limiter;
  /** Resolves once the background log writes started so far have landed. */
  settle(): Promise<void>;
}

/** `make` gives a sentinel limiter on `clock`; the buckets it is asked for have no state yet. */
export function sentinelCases(
  name: string,
  make: (clock: ManualClock, onSmoothing?: SmoothingListener) => SentinelUnderTest | Promise<SentinelUnderTest>,
): void {
  describe(`sentinel variant (${name})`, () => {
    let n = 0;
    const prefix = `sn-${Math.random().toString(36).slice(2)}`;
    const setup = async (onSmoothing?: SmoothingListener) => {
      const clock = new ManualClock(T0);
      const s = await make(clock, onSmoothing);
      const bucket = `${prefix}-${++n}`;
      const check = async (limit: LimitSpec, b = bucket): Promise<LimitResult> => {
        const r = await s.limiter.check(b, limit);
        await s.settle();
        return r;
      };
      return { clock, s, bucket, check };
    };

    test('once the limit is reached requests are refused for per from that request, then the full rate is back', async () => {
      const { clock, check } = await setup();
      const limit = { rate: 3, per: 10 };
      clock.set(T0 + 2_000);
      expect(await check(limit)).toMatchObject({ allowed: true, remaining: 2 });
      clock.set(T0 + 4_000);
      expect((await check(limit)).allowed).toBe(true);
      // reaches the limit at T0+4s: the sentinel it writes holds one window, so that is the next admission
      expect(await check(limit)).toMatchObject({ allowed: true, remaining: 0, reset: (T0 + 14_000) / 1000 });
      expect(await check(limit)).toMatchObject({ allowed: false, reset: (T0 + 14_000) / 1000, retryAfter: 10 });
      // the sliding log alone would admit again at T0+12s (the T0+2s entry leaves); the sentinel holds to T0+14s
      for (const t of [12_500, 13_999]) {
        clock.set(T0 + t);
        expect((await check(limit)).allowed).toBe(false);
      }
      clock.set(T0 + 14_000);
      const back = [];
      for (let i = 0; i < 4; i++) back.push((await check(limit)).allowed);
      expect(back).toEqual([true, true, true, false]);
    });

    test('buckets are independent; rate 0 refuses everything for one window', async () => {
      const { check, bucket } = await setup();
      const one = { rate: 1, per: 60 };
      expect((await check(one, `${bucket}-a`)).allowed).toBe(true);
      expect((await check(one, `${bucket}-b`)).allowed).toBe(true);
      expect((await check(one, `${bucket}-a`)).allowed).toBe(false);
      expect(await check({ rate: 0, per: 60 }, `${bucket}-z`)).toMatchObject({ allowed: false, retryAfter: 60 });
    });

    test('reset forgets the bucket, its sentinel included', async () => {
      const { s, bucket, check } = await setup();
      const limit = { rate: 2, per: 60 };
      for (let i = 0; i < 3; i++) await check(limit);
      await s.limiter.reset!(bucket);
      expect((await check(limit)).allowed).toBe(true);
    });

    test('with smoothing, the requests the sentinel refuses count in R: a steady load at the rate climbs to it, never steps down', async () => {
      const events: [string, number, number][] = [];
      const { clock, check } = await setup((e) => events.push([e.event, e.oldAllowance, e.newAllowance]));
      // 12 per 2 s, threshold 3, step 3: a steady 6 requests a second is exactly the rate
      const limit = { rate: 12, per: 2, smoothing: { enabled: true, threshold: 3, step: 3, trigger: 0.5, delay: 1 } };
      for (let i = 0; i < 60; i++) {
        await check(limit);
        clock.advance(167);
      }
      expect(events.filter(([e]) => e === 'RateLimitSmoothingDown')).toEqual([]);
      expect(events.at(-1)).toEqual(['RateLimitSmoothingUp', 9, 12]);
    });

    test('with smoothing, the allowance climbs once per hold-off while the sentinel refuses, and refusals carry it', async () => {
      const events: SmoothingEvent[] = [];
      const { clock, s, bucket } = await setup((e) => events.push(e));
      const got = await steadyUnderSentinel(
        async (limit) => s.limiter.check(bucket, limit),
        () => s.settle(),
        clock,
        events,
      );
      expect(got.ups.length).toBeGreaterThanOrEqual(6);
      for (let i = 1; i < got.ups.length; i++) expect(got.ups[i]! - got.ups[i - 1]!).toBeGreaterThanOrEqual(1000);
      expect(got.refusalLimits.length).toBeGreaterThan(0);
      expect(Math.max(...got.refusalLimits.slice(0, 4))).toBeLessThan(20); // the smoothed allowance, not the rate
    });
  });
}
