/**
 * The DRL counter in real Redis: the behaviour table the memory counter passes
 * (test/unit/engine/drl-counter-cases.ts), through the Lua script, on a single server and on a 3-master
 * Redis Cluster (one hash per bucket with its hash tag: no CROSSSLOT).
 */
import type { Redis } from 'ioredis';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { RedisLeaseCounter } from '../../../limiters/drl-counter.js';
import { freshRedis, redisUrl, suiteRedisCluster } from '../../helpers/redis.js';
import { counterCases } from '../../unit/engine/drl-counter-cases.js';

let admin: Redis;
let client: StoreClient;
beforeAll(async () => {
  admin = await freshRedis();
  client = createStoreClient(redisUrl(), { maxRetriesPerRequest: 1 });
});
afterAll(() => {
  client.disconnect();
  admin.disconnect();
});

counterCases('Redis', () => ({ counter: new RedisLeaseCounter(client) }));

describe('DRL counter on a Redis Cluster', () => {
  const cc = suiteRedisCluster();
  counterCases('Redis Cluster', () => ({ counter: new RedisLeaseCounter(cc()) }));
});
