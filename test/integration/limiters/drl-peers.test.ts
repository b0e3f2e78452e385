import { Redis } from 'ioredis';
import { systemClock } from '../../../lib/clock.js';
import { DrlPeers } from '../../../limiters/drl-peers.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PERIOD = 0.4;

describe('DRL peer registry', () => {
  let a: Redis;
  let b: Redis;
  beforeAll(async () => {
    a = await freshRedis();
    b = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });
  });
  afterAll(() => {
    a.disconnect();
    b.disconnect();
  });

  test('two peers of a group count 2; a silent one is dead after two periods; groups are separate', async () => {
    const p1 = new DrlPeers(a, 'g1', PERIOD, systemClock);
    const p2 = new DrlPeers(b, 'g1', PERIOD, systemClock);
    const other = new DrlPeers(b, 'g2', PERIOD, systemClock);
    const seen: number[] = [];
    p1.onChange((n) => seen.push(n));
    await p1.start();
    await p2.start();
    await other.start();
    await p1.beat();
    expect(p1.count()).toBe(2);
    expect(p2.count()).toBe(2);
    expect(other.count()).toBe(1);
    await p2.beat(); // its last heartbeat is now, not up to a period ago (the check below keeps a full period of margin)
    await p2.stop(false); // crashes: no deregistration, just silence
    await sleep(PERIOD * 1000);
    expect(p1.count()).toBe(2); // silent for about one period, less than two: still alive
    await sleep(PERIOD * 1000 * 2.5); // well past two periods (plus one heartbeat of p1)
    expect(p1.count()).toBe(1);
    expect(seen).toEqual([2, 1]);
    await p1.stop();
    await other.stop();
  });

  test('a graceful stop deregisters at once', async () => {
    const p1 = new DrlPeers(a, 'g3', PERIOD, systemClock);
    const p2 = new DrlPeers(b, 'g3', PERIOD, systemClock);
    await p1.start();
    await p2.start();
    await p1.beat();
    expect(p1.count()).toBe(2);
    await p2.stop();
    await p1.beat();
    expect(p1.count()).toBe(1);
    await p1.stop();
  });

  test('the last known N is kept while the store is unreachable; N = 1 without a store', async () => {
    const conn = new Redis(redisUrl(), {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    await conn.connect();
    const errors: Error[] = [];
    const p1 = new DrlPeers(conn, 'g4', PERIOD, systemClock, (e) => errors.push(e));
    const p2 = new DrlPeers(b, 'g4', PERIOD, systemClock);
    await p2.start();
    await p1.start();
    expect(p1.count()).toBe(2);
    conn.disconnect();
    await sleep(PERIOD * 1000 * 3);
    await p1.beat();
    expect(p1.count()).toBe(2);
    expect(errors.length).toBeGreaterThan(0);
    await p1.stop(false);
    await p2.stop();
    const alone = new DrlPeers(undefined, 'g5', PERIOD, systemClock);
    await alone.start();
    expect(alone.count()).toBe(1);
  });
});
