import { ManualClock } from '../../../lib/clock.js';
import { RedisQuota } from '../../../limiters/quota.js';
import { burst, twoGateways, type Gateways } from './gateways.js';

const T0 = 1_700_000_040_000;

describe('quotas in Redis', () => {
  let g: Gateways;
  beforeAll(async () => {
    g = await twoGateways();
  });
  afterAll(() => g.close());

  test('exact under concurrency from two gateways', async () => {
    const clock = new ManualClock(T0);
    const a = new RedisQuota(g.a, clock);
    const b = new RedisQuota(g.b, clock);
    const spec = { max: 30, renewal: 3600 };
    expect(
      await burst(
        100,
        () => a.consume('q', spec),
        () => b.consume('q', spec),
      ),
    ).toBe(30);
    expect(await a.read('q', spec)).toEqual({ remaining: 0, renews: T0 / 1000 + 3600 });
  });

  test('renewal with the injected clock; never renews with renewal ≤ 0; reset', async () => {
    const clock = new ManualClock(T0);
    const q = new RedisQuota(g.a, clock);
    const spec = { max: 2, renewal: 60 };
    expect((await q.consume('r', spec)).remaining).toBe(1);
    expect((await q.consume('r', spec)).remaining).toBe(0);
    expect((await q.consume('r', spec)).allowed).toBe(false);
    clock.advance(60_000);
    expect(await q.consume('r', spec)).toEqual({
      allowed: true,
      max: 2,
      remaining: 1,
      renews: T0 / 1000 + 120,
      renewsMs: T0 + 120_000,
    });

    const never = { max: 1, renewal: 0 };
    expect((await q.consume('n', never)).allowed).toBe(true);
    clock.advance(365 * 86_400_000);
    expect(await q.consume('n', never)).toEqual({ allowed: false, max: 1, remaining: 0, renews: 0, renewsMs: 0 });
    await q.reset('n');
    expect((await q.consume('n', never)).allowed).toBe(true);
  });
});
