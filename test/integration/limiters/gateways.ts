/** Two "gateways": two separate ioredis connections to the worker's test database. */
import { Redis } from 'ioredis';
import { freshRedis, redisUrl } from '../../helpers/redis.js';

export interface Gateways {
  a: Redis;
  b: Redis;
  close(): void;
}

export async function twoGateways(): Promise<Gateways> {
  const a = await freshRedis();
  const b = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
  return {
    a,
    b,
    close() {
      a.disconnect();
      b.disconnect();
    },
  };
}

/** n checks fired at once, alternating between the two gateways' limiters; the number admitted. */
export async function burst<T extends { allowed: boolean }>(
  n: number,
  onA: () => Promise<T>,
  onB: () => Promise<T>,
): Promise<number> {
  const all = await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 ? onB() : onA())));
  return all.filter((r) => r.allowed).length;
}

/** A client pointed at a port nothing listens on: every command fails at once. */
export function unreachable(): Redis {
  return new Redis({
    host: '127.0.0.1',
    port: 1,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
}
