import { ManualClock } from '../../../lib/clock.js';
import { MemorySentinel } from '../../../limiters/sentinel.js';
import type { SmoothingEvent } from '../../../limiters/types.js';
import { steadyUnderSentinel, T0 } from './fixtures.js';

describe('sentinel variant (memory)', () => {
  test('after the limit is reached requests are refused for at least per, then the full rate is back', async () => {
    const clock = new ManualClock(T0);
    const s = new MemorySentinel(clock);
    const limit = { rate: 3, per: 10 };
    clock.set(T0 + 2_000);
    const first = await s.check('b', limit);
    expect(first.allowed).toBe(true);
    clock.set(T0 + 4_000);
    expect((await s.check('b', limit)).allowed).toBe(true);
    const third = await s.check('b', limit); // reaches the limit at T0+4s: the sentinel is written
    expect(third.allowed).toBe(true);
    expect(third.remaining).toBe(0);
    expect(third.reset).toBe((T0 + 14_000) / 1000); // the sentinel it writes holds one window: that is the next admission
    const refused = await s.check('b', limit);
    expect(refused.allowed).toBe(false);
    expect(refused.reset).toBe((T0 + 14_000) / 1000);
    // the sliding log alone would admit again at T0+12s (the T0+2s entry leaves); the sentinel holds to T0+14s
    clock.set(T0 + 12_500);
    expect((await s.check('b', limit)).allowed).toBe(false);
    clock.set(T0 + 13_999);
    expect((await s.check('b', limit)).allowed).toBe(false);
    clock.set(T0 + 14_000);
    const back = [];
    for (let i = 0; i < 4; i++) back.push((await s.check('b', limit)).allowed);
    expect(back).toEqual([true, true, true, false]);
  });

  test('with smoothing, the requests the sentinel refuses count in R: a steady load at the rate climbs to it, never steps down', async () => {
    const clock = new ManualClock(T0);
    const events: [string, number, number][] = [];
    const s = new MemorySentinel(clock, (e) => events.push([e.event, e.oldAllowance, e.newAllowance]));
    // 12 per 2 s, threshold 3, step 3: a steady 6 requests a second is exactly the rate
    const limit = { rate: 12, per: 2, smoothing: { enabled: true, threshold: 3, step: 3, trigger: 0.5, delay: 1 } };
    for (let i = 0; i < 60; i++) {
      await s.check('steady', limit);
      clock.advance(167);
    }
    // it used to fall back after every sentinel (R counted only the admitted): Down 6 → 3 at 2.8 s and 8 s
    expect(events.filter(([e]) => e === 'RateLimitSmoothingDown')).toEqual([]);
    expect(events.at(-1)).toEqual(['RateLimitSmoothingUp', 9, 12]);
  });

  test('with smoothing, the allowance climbs once per hold-off while the sentinel refuses, and refusals carry it', async () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const s = new MemorySentinel(clock, (e) => events.push(e));
    const got = await steadyUnderSentinel(
      (limit) => s.check('climb', limit),
      async () => undefined,
      clock,
      events,
    );
    // it stepped up only with log writes, about once a window: 2 Ups in 8 s
    expect(got.ups.length).toBeGreaterThanOrEqual(6);
    for (let i = 1; i < got.ups.length; i++) expect(got.ups[i]! - got.ups[i - 1]!).toBeGreaterThanOrEqual(1000);
    expect(got.refusalLimits.length).toBeGreaterThan(0);
    expect(got.refusalLimits[0]).toBeLessThan(20); // it was the rate, 20
  });
});
