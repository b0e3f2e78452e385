/**
 * The sliding window log's behaviour table (smoothing included), run against every implementation: the
 * memory log here (test/unit/engine/sliding-log.test.ts) and the Redis log, script and pipeline, on one
 * server and on a Redis Cluster (test/integration/limiters/sliding-log.test.ts, tables-cluster.test.ts).
 * Both take the time from the injected clock, so nothing waits.
 */
import { ManualClock } from '../../../lib/clock.js';
import type { Limiter, LimitResult, SmoothingEvent, SmoothingListener } from '../../../limiters/types.js';
import type { LimitSpec } from '../../../contract/config.js';
import { CURVE_EVENTS, CURVE_LIMIT, driveCurve, editedSmoothedLimit, T0 } from './fixtures.js';

export interface LogOptions {
  onSmoothing?: SmoothingListener;
  /** The gateway option `enable_rate_limit_smoothing` (default on). */
  smoothingEnabled?: boolean;
}

/** `make` gives a sliding log on `clock`; the buckets it is asked for have no state yet. */
export function slidingLogCases(
  name: string,
  make: (clock: ManualClock, o: LogOptions) => Limiter | Promise<Limiter>,
): void {
  describe(`sliding window log (${name})`, () => {
    let n = 0;
    const prefix = `sl-${Math.random().toString(36).slice(2)}`;
    const setup = async (o: LogOptions = {}) => {
      const clock = new ManualClock(T0);
      const log = await make(clock, o);
      const bucket = `${prefix}-${++n}`;
      const check = async (limit: LimitSpec, tentative = false, b = bucket): Promise<LimitResult> =>
        log.check(b, limit, tentative);
      return { clock, log, bucket, check };
    };

    test('admits exactly rate per per, then refuses with the time one more is admitted', async () => {
      const { clock, check } = await setup();
      const limit = { rate: 5, per: 10 };
      const rs = [];
      for (let i = 0; i < 7; i++) rs.push(await check(limit));
      expect(rs.map((r) => r.allowed)).toEqual([true, true, true, true, true, false, false]);
      expect(rs.map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0]);
      expect(rs.every((r) => r.limit === 5)).toBe(true);
      expect(rs[0]!.retryAfter).toBe(0);
      expect(rs[5]!.retryAfter).toBe(10);
      expect(rs[5]!.reset).toBe((T0 + 10_000) / 1000);
      clock.set(T0 + 9_999); // one ms before the first entries leave the window
      expect((await check(limit)).allowed).toBe(false);
      clock.set(T0 + 9_999 + 10_000); // the window has passed the burst and the refused ones
      expect((await check(limit)).allowed).toBe(true);
    });

    test('a tentative check (throttling) is logged only when admitted; a plain refused request is logged', async () => {
      const { clock, check } = await setup();
      const limit = { rate: 2, per: 3 };
      for (let i = 0; i < 3; i++) await check(limit); // the 3rd is refused and logged
      for (const t of [1_000, 2_000]) {
        clock.set(T0 + t);
        const r = await check(limit, true);
        expect(r.allowed).toBe(false);
        expect(r.reset).toBe((T0 + 3_000) / 1000); // the T0 entries leave at T0+3s
      }
      clock.set(T0 + 3_000); // no retry entry holds the window shut
      expect((await check(limit, true)).allowed).toBe(true);
      expect((await check(limit, true)).allowed).toBe(true);
      expect((await check(limit, true)).allowed).toBe(false);
      expect((await check(limit)).allowed).toBe(false); // a request (not a retry) is logged even when refused
      clock.set(T0 + 5_999);
      expect((await check(limit)).allowed).toBe(false); // the T0+3s entries are still in the window
    });

    test('spike arrest: refused requests enter the log and extend the block until a whole quiet window', async () => {
      const { clock, check } = await setup();
      const limit = { rate: 2, per: 10 };
      expect((await check(limit)).allowed).toBe(true);
      expect((await check(limit)).allowed).toBe(true);
      // a client calling every 2 s never gets through, although a fixed window would reopen at 10 s
      for (let t = 2_000; t <= 30_000; t += 2_000) {
        clock.set(T0 + t);
        expect((await check(limit)).allowed).toBe(false);
      }
      for (const t of [35_000, 39_999, 40_000]) {
        clock.set(T0 + t); // (t − 10 s, t] still holds two entries
        expect((await check(limit)).allowed).toBe(false);
      }
      clock.set(T0 + 50_000); // (40, 50] is empty
      expect((await check(limit)).allowed).toBe(true);
    });

    test('never more than rate in any trailing window; evenly spaced traffic at exactly the rate is all admitted', async () => {
      const { clock, check, bucket } = await setup();
      const limit = { rate: 4, per: 2 };
      for (let i = 0; i < 40; i++) {
        clock.set(T0 + i * 500);
        expect((await check(limit, false, `${bucket}-even`)).allowed).toBe(true);
      }
      const admitted: number[] = [];
      for (let i = 0; i < 400; i++) {
        const t = T0 + 100_000 + i * 37 + (i % 7) * 11;
        clock.set(t);
        if ((await check(limit, false, `${bucket}-irregular`)).allowed) admitted.push(t);
      }
      for (const t of admitted) expect(admitted.filter((u) => u > t - 2_000 && u <= t).length).toBeLessThanOrEqual(4);
      expect(admitted.length).toBeGreaterThan(0); // spike arrest: the busy log lets the first ones through only
    });

    test('the reset of a refusal is when one more request is admitted', async () => {
      const { clock, check } = await setup();
      const limit = { rate: 2, per: 10 };
      await check(limit);
      clock.advance(3_000);
      expect((await check(limit)).remaining).toBe(0);
      clock.advance(1_000);
      const r = await check(limit); // refused; the log holds T0, T0+3s, T0+4s
      expect(r.allowed).toBe(false);
      expect(r.reset).toBe((T0 + 13_000) / 1000); // two entries must leave: T0 and T0+3s
      expect(r.retryAfter).toBe(9);
      clock.set(T0 + 12_999);
      expect((await check(limit)).allowed).toBe(false);
      clock.set(T0 + 30_000);
      expect((await check(limit)).allowed).toBe(true);
    });

    test('buckets are independent; rate 0 refuses everything for a window; a fractional rate rounds down', async () => {
      const { check, bucket } = await setup();
      const one = { rate: 1, per: 60 };
      expect((await check(one, false, `${bucket}-a`)).allowed).toBe(true);
      expect((await check(one, false, `${bucket}-b`)).allowed).toBe(true);
      expect((await check(one, false, `${bucket}-a`)).allowed).toBe(false);
      const zero = await check({ rate: 0, per: 60 }, false, `${bucket}-z`);
      expect(zero).toMatchObject({ allowed: false, limit: 0, remaining: 0, retryAfter: 60 });
      const frac = [];
      for (let i = 0; i < 4; i++) frac.push((await check({ rate: 2.9, per: 60 }, false, `${bucket}-f`)).allowed);
      expect(frac).toEqual([true, true, false, false]);
    });

    test('reset forgets the bucket', async () => {
      const { log, bucket, check } = await setup();
      const limit = { rate: 2, per: 60 };
      for (let i = 0; i < 3; i++) await check(limit);
      await log.reset!(bucket);
      expect((await check(limit)).allowed).toBe(true);
    });

    // threshold 5, step 5, trigger 0.5 (up above A − 2.5, down below A − 7.5), delay 10 s
    const smooth = { enabled: true, threshold: 5, step: 5, trigger: 0.5, delay: 10 };

    test('smoothing: R > A refuses; the allowance rises with the rate and falls back step by step to threshold', async () => {
      const events: SmoothingEvent[] = [];
      const { clock, check, bucket } = await setup({ onSmoothing: (e) => events.push(e) });
      const limit = { rate: 20, per: 60, smoothing: smooth };
      const rs = [];
      for (let i = 0; i < 12; i++) rs.push(await check(limit));
      // the 3rd request lifts A from 5 to 10; the hold-off keeps it there: 10 admitted, then refused
      expect(rs.filter((r) => r.allowed).length).toBe(10);
      expect(rs[10]).toMatchObject({ allowed: false, limit: 10 });
      expect(events).toEqual([
        {
          event: 'RateLimitSmoothingUp',
          limiterKey: bucket,
          oldAllowance: 5,
          newAllowance: 10,
          time: new Date(T0).toISOString(),
        },
      ]);
      clock.advance(10_000); // hold-off over: R = 13 > 7.5 → 15, so this request passes
      expect(await check(limit)).toMatchObject({ allowed: true, limit: 15 });
      for (let i = 0; i < 3; i++) {
        clock.advance(61_000); // quiet: each request after a hold-off steps down (R = 1), then nothing at threshold
        await check(limit);
      }
      expect(events.map((e) => [e.event, e.oldAllowance, e.newAllowance])).toEqual([
        ['RateLimitSmoothingUp', 5, 10],
        ['RateLimitSmoothingUp', 10, 15],
        ['RateLimitSmoothingDown', 15, 10],
        ['RateLimitSmoothingDown', 10, 5],
      ]);
    });

    test('smoothing off (gateway option or the limit’s own object) → the plain rate, no events', async () => {
      const events: SmoothingEvent[] = [];
      const off = await setup({ onSmoothing: (e) => events.push(e), smoothingEnabled: false });
      const on = await setup({ onSmoothing: (e) => events.push(e) });
      let a = 0;
      let b = 0;
      for (let i = 0; i < 25; i++) {
        if ((await off.check({ rate: 20, per: 60, smoothing: smooth })).allowed) a++;
        if ((await on.check({ rate: 20, per: 60, smoothing: { ...smooth, enabled: false } })).allowed) b++;
      }
      expect([a, b]).toEqual([20, 20]);
      expect(events).toEqual([]);
    });

    test('smoothing: after an idle hour the allowance steps down with its event (its state outlives many windows)', async () => {
      const events: SmoothingEvent[] = [];
      const { clock, check } = await setup({ onSmoothing: (e) => events.push(e) });
      const limit = { rate: 20, per: 1, smoothing: smooth };
      for (let i = 0; i < 3; i++) await check(limit); // R = 3 > 2.5: up to 10
      clock.advance(60 * 60 * 1000);
      expect((await check(limit)).limit).toBe(5); // R = 1 < 10 − 7.5: one step down, announced
      expect(events.map((e) => [e.event, e.oldAllowance, e.newAllowance])).toEqual([
        ['RateLimitSmoothingUp', 5, 10],
        ['RateLimitSmoothingDown', 10, 5],
      ]);
    });

    test('smoothing: an edited limit: a lowered rate caps the stored allowance at once, a raised threshold lifts it', async () => {
      const { clock, check } = await setup();
      const got = await editedSmoothedLimit((limit) => check(limit), clock);
      expect(got.lifted).toBe(12);
      expect(got.lowered.admitted).toBeLessThanOrEqual(6);
      expect(got.lowered.maxLimit).toBeLessThanOrEqual(6);
      expect(got.raised).toBeGreaterThanOrEqual(10);
    });

    test('smoothing: the scripted request-rate curve climbs by steps to rate and back to threshold, with the hold-offs', async () => {
      const events: SmoothingEvent[] = [];
      const { clock, check } = await setup({ onSmoothing: (e) => events.push(e) });
      const got = await driveCurve(() => check(CURVE_LIMIT), clock, events);
      expect(got.events).toEqual(CURVE_EVENTS);
      expect(Math.max(...got.allowance)).toBe(16);
      expect(got.allowance.at(-1)).toBe(4);
    });
  });
}
