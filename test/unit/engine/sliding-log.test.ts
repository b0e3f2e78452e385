import { ManualClock } from '../../../lib/clock.js';
import { MemorySlidingLog } from '../../../limiters/sliding-log.js';
import { T0 } from './fixtures.js';

describe('sliding window log (memory)', () => {
  const setup = () => {
    const clock = new ManualClock(T0);
    return { clock, log: new MemorySlidingLog(clock) };
  };

  test('admits exactly rate per per, then refuses with the time one more is admitted', async () => {
    const { clock, log } = setup();
    const limit = { rate: 5, per: 10 };
    const rs = [];
    for (let i = 0; i < 7; i++) rs.push(await log.check('b', limit));
    expect(rs.map((r) => r.allowed)).toEqual([true, true, true, true, true, false, false]);
    expect(rs.map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0]);
    expect(rs.every((r) => r.limit === 5)).toBe(true);
    const refused = rs[5]!;
    expect(refused.retryAfter).toBe(10);
    expect(refused.reset).toBe((T0 + 10_000) / 1000);
    // one ms before the first entries leave the window: still refused
    clock.set(T0 + 9_999);
    expect((await log.check('b', limit)).allowed).toBe(false);
    // once the window has passed the whole burst (and the refused ones) admitted again
    clock.set(T0 + 9_999 + 10_000);
    expect((await log.check('b', limit)).allowed).toBe(true);
  });

  test('a tentative check (throttling) is logged only when admitted', async () => {
    const { clock, log } = setup();
    const limit = { rate: 2, per: 3 };
    for (let i = 0; i < 3; i++) log.check('b', limit); // the 3rd is refused and logged
    clock.set(T0 + 1_000);
    expect(log.check('b', limit, true).allowed).toBe(false);
    clock.set(T0 + 2_000);
    const r = log.check('b', limit, true);
    expect(r.allowed).toBe(false);
    expect(r.reset).toBe((T0 + 3_000) / 1000);
    clock.set(T0 + 3_000); // the three T0 entries leave; no retry entry holds the window shut
    expect(log.check('b', limit, true).allowed).toBe(true);
    expect(log.check('b', limit, true).allowed).toBe(true);
    expect(log.check('b', limit, true).allowed).toBe(false);
    // a request (not a retry) is logged even when refused: spike arrest
    expect(log.check('b', limit).allowed).toBe(false);
    clock.set(T0 + 5_999);
    expect(log.check('b', limit).allowed).toBe(false); // the T0+3s entries are still in the window
  });

  test('spike arrest: refused requests enter the log and extend the block', async () => {
    const { clock, log } = setup();
    const limit = { rate: 2, per: 10 };
    expect((await log.check('b', limit)).allowed).toBe(true);
    expect((await log.check('b', limit)).allowed).toBe(true);
    // a client keeps calling every 2 s: it never gets through, although a fixed window would reopen at 10 s
    for (let t = 2_000; t <= 30_000; t += 2_000) {
      clock.set(T0 + t);
      expect((await log.check('b', limit)).allowed).toBe(false);
    }
    // traffic resumes only once the rate has stayed below the limit for a whole window
    clock.set(T0 + 35_000); // window (25 s, 35 s] holds 26, 28, 30
    expect((await log.check('b', limit)).allowed).toBe(false);
    clock.set(T0 + 39_999); // (29.999, 39.999] holds 30 and 35: still full
    expect((await log.check('b', limit)).allowed).toBe(false);
    clock.set(T0 + 40_000); // (30, 40] holds 35 and 39.999: full
    expect((await log.check('b', limit)).allowed).toBe(false);
    clock.set(T0 + 50_000); // (40, 50] is empty: after a whole quiet window it reopens
    expect((await log.check('b', limit)).allowed).toBe(true);
  });

  test('never more than rate in any trailing window (evenly spaced traffic at exactly the rate is all admitted)', async () => {
    const { clock, log } = setup();
    const limit = { rate: 4, per: 2 };
    for (let i = 0; i < 40; i++) {
      clock.set(T0 + i * 500);
      expect((await log.check('even', limit)).allowed).toBe(true);
    }
    // irregular traffic: count admissions in every trailing window
    const admitted: number[] = [];
    for (let i = 0; i < 400; i++) {
      const t = T0 + 100_000 + i * 37 + (i % 7) * 11;
      clock.set(t);
      if ((await log.check('irregular', limit)).allowed) admitted.push(t);
    }
    for (const t of admitted) expect(admitted.filter((u) => u > t - 2_000 && u <= t).length).toBeLessThanOrEqual(4);
    expect(admitted.length).toBeGreaterThan(0);
  });

  test('the reset of a refusal is when one more request is admitted', async () => {
    const { clock, log } = setup();
    const limit = { rate: 2, per: 10 };
    await log.check('b', limit);
    clock.advance(3_000);
    await log.check('b', limit);
    clock.advance(1_000);
    const r = await log.check('b', limit); // refused; log holds T0, T0+3s, T0+4s
    expect(r.allowed).toBe(false);
    // needs two entries to leave: T0 and T0+3s → at T0+13s
    expect(r.reset).toBe((T0 + 13_000) / 1000);
    expect(r.retryAfter).toBe(9);
    clock.set(T0 + 13_000);
    expect((await log.check('b', limit)).allowed).toBe(true);
  });

  test('buckets are independent; rate 0 refuses everything', async () => {
    const { log } = setup();
    expect((await log.check('a', { rate: 1, per: 60 })).allowed).toBe(true);
    expect((await log.check('b', { rate: 1, per: 60 })).allowed).toBe(true);
    expect((await log.check('a', { rate: 1, per: 60 })).allowed).toBe(false);
    const zero = await log.check('z', { rate: 0, per: 60 });
    expect(zero.allowed).toBe(false);
    expect(zero.retryAfter).toBeGreaterThanOrEqual(1);
  });
});
