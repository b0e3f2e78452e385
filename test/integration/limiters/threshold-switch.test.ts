/**
 * A limit drl_threshold moves between the DRL and the sliding log (its N crossed the threshold: a peer
 * joined or left) keeps one allowance in Redis: the log counts the DRL counter's grants in their window,
 * the DRL counter counts the log's entries. Before, each switch started the other algorithm afresh (an
 * outside audit measured 48 admitted in a window of a 24 per 2 s limit).
 */
import { ManualClock } from '../../../lib/clock.js';
import { RedisLeaseCounter, slotMsOf, LEASE_SLOTS } from '../../../limiters/drl-counter.js';
import { RedisSlidingLog } from '../../../limiters/sliding-log.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { redisUrl, suiteRedisCluster } from '../../helpers/redis.js';

const T0 = 1_700_000_040_000;
const LIMIT = { rate: 10, per: 4 };
const SLOT = slotMsOf(LIMIT.per); // 100 ms

let client: StoreClient;
beforeAll(() => {
  client = createStoreClient(redisUrl(), { maxRetriesPerRequest: 1 });
});
afterAll(() => client.disconnect());

function switchCases(name: string, store: () => StoreClient): void {
  describe(`drl_threshold switch (${name})`, () => {
    let n = 0;
    const bucket = (): string => `k:switch-${name.replace(/\W/g, '')}-${++n}-${Math.random().toString(36).slice(2)}`;
    const lease = (counter: RedisLeaseCounter, b: string, asked: number, at: number) =>
      counter.lease(b, {
        asked,
        rate: LIMIT.rate,
        slotMs: SLOT,
        now: T0 + at,
        life: LEASE_SLOTS,
        backSlot: 0,
        back: 0,
      });

    for (const transactional of [true, false]) {
      const variant = transactional ? 'script' : 'pipeline';
      test(`DRL → log (${variant}): the log admits only what the DRL's grants left of the window`, async () => {
        const clock = new ManualClock(T0);
        const counter = new RedisLeaseCounter(store());
        const log = new RedisSlidingLog(store(), clock, { transactional, smoothingEnabled: false });
        const b = bucket();
        expect((await lease(counter, b, 7, 0)).granted).toBe(7);
        clock.set(T0 + 1000);
        const answers = [];
        for (let i = 0; i < 5; i++) answers.push(await log.check(b, LIMIT));
        expect(answers.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
        // refused until the DRL's grant (slot 0, counted 41 slots) leaves: 3.1 s after now
        expect(answers[4]!.retryAfter).toBe(4);
        clock.set(T0 + 41 * SLOT);
        expect((await log.check(b, LIMIT)).allowed).toBe(true);
      });
    }

    test('log → DRL: the counter grants only what the log left of the window, and frees as its entries leave', async () => {
      const clock = new ManualClock(T0);
      const counter = new RedisLeaseCounter(store());
      const log = new RedisSlidingLog(store(), clock, { transactional: true, smoothingEnabled: false });
      const b = bucket();
      for (let i = 0; i < 6; i++) expect((await log.check(b, LIMIT)).allowed).toBe(true);
      expect(await lease(counter, b, 10, 500)).toMatchObject({ granted: 4, left: 0 });
      const spent = await lease(counter, b, 1, 600);
      expect(spent.granted).toBe(0);
      // the log's entries (at 0) leave first: 41 slots after 600 ms would be the DRL's own grant
      expect(spent.nextFreeMs).toBe(41 * SLOT - 600);
      expect((await lease(counter, b, 10, 41 * SLOT + 1)).granted).toBe(6);
    });

    test('a bucket with no record of the other algorithm is counted as before', async () => {
      const clock = new ManualClock(T0);
      const log = new RedisSlidingLog(store(), clock, { transactional: true, smoothingEnabled: false });
      const b = bucket();
      const allowed = [];
      for (let i = 0; i < 12; i++) allowed.push((await log.check(b, LIMIT)).allowed);
      expect(allowed.filter(Boolean)).toHaveLength(10);
      expect((await lease(new RedisLeaseCounter(store()), bucket(), 10, 0)).granted).toBe(10);
    });
  });
}

switchCases('Redis', () => client);

describe('on a Redis Cluster (the log and the counter share the bucket hash tag)', () => {
  const cc = suiteRedisCluster();
  switchCases('Redis Cluster', () => cc());
});
