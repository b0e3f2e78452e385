/**
 * For integration tests: a Redis URL on the run's real redis-server, using a database of its own per
 * jest worker, flushed when a suite starts.
 */
import { Redis } from 'ioredis';
import { createStoreClient, type StoreClient } from '../../lib/store/redis.js';
import { startRedisCluster, type RedisClusterHandle } from '../harness/redis-cluster.js';

export function redisUrl(): string {
  const base = process.env.GW_TEST_REDIS_URL;
  if (!base)
    throw new Error(
      'GW_TEST_REDIS_URL is not set: run the tests through `make test` (jest globalSetup starts redis-server)',
    );
  const db = Number(process.env.JEST_WORKER_ID ?? '1');
  return `${base}/${db}`;
}

/** Connect and FLUSHDB the worker's database. */
export async function freshRedis(): Promise<Redis> {
  const r = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  await r.flushdb();
  return r;
}

/**
 * A real 3-master Redis Cluster for the calling suite (started in its beforeAll, stopped in its afterAll)
 * and a store client on it, as the gateway makes one from a `redis+cluster://` URL. Call at the suite's
 * top level or in a describe; use the getter inside tests.
 */
export function suiteRedisCluster(): () => StoreClient {
  let cluster: RedisClusterHandle | undefined;
  let client: StoreClient | undefined;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    client = createStoreClient(cluster.url, { maxRetriesPerRequest: 1 });
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });
  return () => {
    if (!client) throw new Error('the Redis Cluster is not started (use the getter inside a test)');
    return client;
  };
}
