import { ManualClock } from '../../../lib/clock.js';
import { MemorySentinel } from '../../../sidecar/limiters/sentinel.js';
import { T0 } from './fixtures.js';

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
});
