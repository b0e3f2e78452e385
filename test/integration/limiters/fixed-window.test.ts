import { ManualClock } from '../../../lib/clock.js';
import { RedisFixedWindow } from '../../../limiters/fixed-window.js';
import { burst, twoGateways, type Gateways } from './gateways.js';

const T0 = 1_700_000_040_000; // a multiple of 60 s

describe('fixed window in Redis', () => {
  let g: Gateways;
  beforeAll(async () => {
    g = await twoGateways();
  });
  afterAll(() => g.close());

  test('200 concurrent checks from two gateways for rate 50 → exactly 50 admitted', async () => {
    const clock = new ManualClock(T0 + 10_000);
    const a = new RedisFixedWindow(g.a, clock);
    const b = new RedisFixedWindow(g.b, clock);
    const limit = { rate: 50, per: 60 };
    expect(
      await burst(
        200,
        () => a.check('fw', limit),
        () => b.check('fw', limit),
      ),
    ).toBe(50);
  });

  test('the counter restarts at the epoch-aligned boundary, and expires with its window', async () => {
    const clock = new ManualClock(T0 + 59_000);
    const fw = new RedisFixedWindow(g.a, clock);
    const limit = { rate: 2, per: 60 };
    const before = [];
    for (let i = 0; i < 3; i++) before.push(await fw.check('edge', limit));
    expect(before.map((r) => r.allowed)).toEqual([true, true, false]);
    expect(before[2]!.reset).toBe((T0 + 60_000) / 1000);
    expect(before[2]!.retryAfter).toBe(1);
    clock.set(T0 + 60_000);
    expect((await fw.check('edge', limit)).allowed).toBe(true);
    const keys = await g.a.keys('gw:{edge}:fw:*');
    expect(keys).toHaveLength(2);
    for (const k of keys) expect(await g.a.pttl(k)).toBeGreaterThan(0);
  });
});
