import { ManualClock } from '../../../lib/clock.js';
import { MemoryFixedWindow, fixedWindow } from '../../../limiters/fixed-window.js';
import { T0 } from './fixtures.js';

describe('fixed window (memory)', () => {
  test('windows are epoch-aligned', () => {
    expect(fixedWindow(T0 + 59_999, 60)).toEqual({
      id: (T0 + 59_999 - ((T0 + 59_999) % 60_000)) / 60_000,
      end: T0 + 60_000,
    });
    expect(fixedWindow(T0 + 60_000, 60).end).toBe(T0 + 120_000);
  });

  test('rate per window, blocked until the epoch-aligned boundary, then the counter restarts', async () => {
    const clock = new ManualClock(T0 + 45_000); // 15 s before the boundary at T0+60s
    const fw = new MemoryFixedWindow(clock);
    const limit = { rate: 3, per: 60 };
    const rs = [];
    for (let i = 0; i < 5; i++) rs.push(await fw.check('b', limit));
    expect(rs.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
    expect(rs[2]!.remaining).toBe(0);
    expect(rs[3]!.reset).toBe((T0 + 60_000) / 1000);
    expect(rs[3]!.retryAfter).toBe(15);
    clock.set(T0 + 59_999);
    expect((await fw.check('b', limit)).allowed).toBe(false);
    // no spike arrest: the refused requests do not carry over
    clock.set(T0 + 60_000);
    const next = [];
    for (let i = 0; i < 4; i++) next.push((await fw.check('b', limit)).allowed);
    expect(next).toEqual([true, true, true, false]);
  });
});
