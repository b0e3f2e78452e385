/** jest globalSetup: one real redis-server and one real kube-apiserver + etcd per test run. */
import { startRedis, type RedisHandle } from './redis.js';

declare global {
  var __GW_REDIS__: RedisHandle | undefined;
  var __GW_KUBE__: { stop(): Promise<void> } | undefined;
}

export default async function globalSetup(): Promise<void> {
  const redis = await startRedis();
  globalThis.__GW_REDIS__ = redis;
  process.env.GW_TEST_REDIS_URL = redis.url;
  console.log(`\n[gw-test] ${redis.version} on ${redis.url}`);
}
