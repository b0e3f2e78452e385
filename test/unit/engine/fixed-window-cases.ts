/**
 * The fixed window's behaviour table, run against every implementation: memory here
 * (test/unit/engine/fixed-window.test.ts) and Redis on one server and on a Redis Cluster
 * (test/integration/limiters/fixed-window.test.ts, tables-cluster.test.ts), on the injected clock.
 */
import { ManualClock } from '../../../lib/clock.js';
import { fixedWindow } from '../../../limiters/fixed-window.js';
import type { Limiter, LimitResult } from '../../../limiters/types.js';
import type { LimitSpec } from '../../../contract/config.js';
import { T0 } from './fixtures.js';

/** `make` gives a fixed-window limiter on `clock`; the buckets it is asked for have no state yet. */
export function fixedWindowCases(name: string, make: (clock: ManualClock) => Limiter | Promise<Limiter>): void {
  describe(`fixed window (${name})`, () => {
    let n = 0;
    const prefix = `fw-${Math.random().toString(36).slice(2)}`;
    const setup = async (start: number) => {
      const clock = new ManualClock(start);
      const fw = await make(clock);
      const bucket = `${prefix}-${++n}`;
      const check = async (limit: LimitSpec, b = bucket): Promise<LimitResult> => fw.check(b, limit);
      return { clock, check, bucket };
    };

    test('windows are epoch-aligned', () => {
      const at = T0 + 59_999;
      expect(fixedWindow(at, 60)).toEqual({ id: Math.floor(at / 60_000), end: T0 + 60_000 });
      expect(fixedWindow(T0 + 60_000, 60).end).toBe(T0 + 120_000);
      expect(fixedWindow(T0 + 250, 0.1)).toEqual({ id: (T0 + 200) / 100, end: T0 + 300 });
    });

    test('rate per window, refused until the epoch-aligned boundary, then the counter restarts (no spike arrest)', async () => {
      const { clock, check } = await setup(T0 + 45_000); // 15 s before the boundary at T0+60s
      const limit = { rate: 3, per: 60 };
      const rs = [];
      for (let i = 0; i < 5; i++) rs.push(await check(limit));
      expect(rs.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
      expect(rs.map((r) => r.remaining)).toEqual([2, 1, 0, 0, 0]);
      expect(rs.every((r) => r.limit === 3)).toBe(true);
      expect(rs[0]).toMatchObject({ retryAfter: 0, reset: (T0 + 45_000) / 1000 });
      // the request that takes the last one: the next admission is the boundary
      expect(rs[2]!.reset).toBe((T0 + 60_000) / 1000);
      expect(rs[3]).toMatchObject({ reset: (T0 + 60_000) / 1000, retryAfter: 15 });
      clock.set(T0 + 59_999);
      expect(await check(limit)).toMatchObject({ allowed: false, retryAfter: 1 });
      clock.set(T0 + 60_000); // the refused requests do not carry over
      const next = [];
      for (let i = 0; i < 4; i++) next.push((await check(limit)).allowed);
      expect(next).toEqual([true, true, true, false]);
    });

    test('a burst across the boundary: up to twice the rate within one window length, never more than rate per window', async () => {
      const { clock, check } = await setup(T0 + 9_900);
      const limit = { rate: 4, per: 10 };
      const admitted: number[] = [];
      for (let t = 9_900; t < 10_100; t += 10) {
        clock.set(T0 + t);
        if ((await check(limit)).allowed) admitted.push(t);
      }
      expect(admitted.filter((t) => t < 10_000)).toHaveLength(4);
      expect(admitted.filter((t) => t >= 10_000)).toHaveLength(4);
    });

    test('buckets are independent; rate 0 refuses everything until the window ends; a fractional rate rounds down', async () => {
      const { check, bucket } = await setup(T0 + 30_000);
      const one = { rate: 1, per: 60 };
      expect((await check(one, `${bucket}-a`)).allowed).toBe(true);
      expect((await check(one, `${bucket}-b`)).allowed).toBe(true);
      expect((await check(one, `${bucket}-a`)).allowed).toBe(false);
      expect(await check({ rate: 0, per: 60 }, `${bucket}-z`)).toMatchObject({
        allowed: false,
        limit: 0,
        retryAfter: 30,
      });
      const frac = [];
      for (let i = 0; i < 4; i++) frac.push((await check({ rate: 2.9, per: 60 }, `${bucket}-f`)).allowed);
      expect(frac).toEqual([true, true, false, false]);
    });

    test('a sub-second window restarts on its own boundary', async () => {
      const { clock, check } = await setup(T0 + 1_050);
      const limit = { rate: 2, per: 0.1 };
      const got = [];
      for (let i = 0; i < 3; i++) got.push((await check(limit)).allowed);
      expect(got).toEqual([true, true, false]);
      clock.set(T0 + 1_100);
      expect((await check(limit)).allowed).toBe(true);
    });
  });
}
