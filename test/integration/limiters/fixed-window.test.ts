import { ManualClock } from '../../../lib/clock.js';
import { RedisFixedWindow } from '../../../limiters/fixed-window.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { redisUrl } from '../../helpers/redis.js';
import { burst, twoGateways, type Gateways } from './gateways.js';
import { fixedWindowCases } from '../../unit/engine/fixed-window-cases.js';

const T0 = 1_700_000_040_000; // a multiple of 60 s

let client: StoreClient;
beforeAll(() => {
  client = createStoreClient(redisUrl(), { maxRetriesPerRequest: 1 });
});
afterAll(() => client.disconnect());

fixedWindowCases('Redis', (clock) => new RedisFixedWindow(client, clock));

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

  test('one counter per window, each expiring after its window', async () => {
    const clock = new ManualClock(T0 + 59_000);
    const fw = new RedisFixedWindow(g.a, clock);
    const limit = { rate: 2, per: 60 };
    for (let i = 0; i < 3; i++) await fw.check('edge', limit);
    clock.set(T0 + 60_000);
    await fw.check('edge', limit);
    const keys = await g.a.keys('gw:{edge}:fw:*');
    expect(keys).toHaveLength(2);
    for (const k of keys) expect(await g.a.pttl(k)).toBeGreaterThan(0);
  });
});
