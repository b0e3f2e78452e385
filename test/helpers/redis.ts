/**
 * For integration tests: a Redis URL on the run's real redis-server, using a database of its own per
 * jest worker, flushed when a suite starts.
 */
import { Redis } from 'ioredis';

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
