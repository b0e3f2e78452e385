/**
 * `gw standalone --redis` with many keys (3,000 here; 100,000 in `make bench-scale`, test/bench/scale-redis.ts),
 * on a redis-server of its own (the suite FLUSHALLs it):
 *   - every session is in Redis at the ready line, written in batches (MSET), not one round trip per key;
 *   - a request with a key of the directory reads no session from Redis (the directory is the source of
 *     truth, answered from memory): the per-request cost does not grow with the number of keys;
 *   - FLUSHALL: every session written again within docs/contract.md#faults's 5 s, and no request refused meanwhile.
 */
import { jest } from '@jest/globals';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { startRedis, type RedisHandle } from '../harness/redis.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';

const KEYS = 3000;
jest.setTimeout(60_000);

async function sessionCount(r: Redis): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await r.scan(cursor, 'MATCH', 'gw:session:*', 'COUNT', 1000);
    n += keys.length;
    cursor = next;
  } while (cursor !== '0');
  return n;
}

async function commandCalls(r: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

describe(`gw standalone --redis with ${KEYS} keys`, () => {
  let server: RedisHandle;
  let redis: Redis;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let dir: string;
  let gw: Standalone;
  let pool: Pool;

  const get = async (key: string): Promise<number> => {
    const r = await pool.request({ method: 'GET', path: '/keyed/x', headers: { authorization: key } });
    await r.body.dump();
    return r.statusCode;
  };

  beforeAll(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
    echo = await startEcho();
    dir = tempDir('gw-redis-scale-');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'api.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: keyed}\nspec:\n  api_id: keyed\n  proxy: {listen_path: /keyed/, target_url: '${echo.url}'}\n`,
    );
    for (let f = 0; f < KEYS / 1000; f++) {
      const docs: string[] = [];
      for (let k = f * 1000; k < (f + 1) * 1000; k++)
        docs.push(
          `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${k}}\nspec: {key_hash: ${sha256hex(`scale-${k}`)}, rate: 1000, per: 1}\n`,
        );
      writeFileSync(join(dir, `keys-${f}.yaml`), docs.join('---\n'));
    }
    gw = await startStandalone(dir, ['--redis', server.url], {}, { readyTimeoutMs: 45_000 });
    pool = new Pool(gw.gateway, { connections: 8 });
  });
  afterAll(async () => {
    await pool?.close();
    await gw?.stop();
    redis?.disconnect();
    echo?.server.close();
    await server?.stop();
    if (dir) cleanup(dir);
  });

  test('the store epoch is set by the ready line: a store emptied any time after start-up is noticed', async () => {
    // the epoch is learnt before the start-up sessions; a missing or changed epoch later means an emptied store
    expect(await redis.exists('gw:store:epoch')).toBe(1);
  });

  test('every session is in Redis at the ready line, written in batches', async () => {
    expect(await sessionCount(redis)).toBe(KEYS);
    const calls = await commandCalls(redis);
    // one MSET and one PUBLISH per batch of sessions (a round trip per key would be 3,000 of each)
    expect(calls.mset).toBeGreaterThanOrEqual(3);
    expect(calls.mset).toBeLessThanOrEqual(30);
    expect(calls.publish).toBeLessThanOrEqual(30);
    expect(calls.exec).toBeLessThanOrEqual(60);
  });

  test('requests with the directory keys read no session from Redis', async () => {
    await redis.config('RESETSTAT');
    const codes = await Promise.all(Array.from({ length: 300 }, (_, i) => get(`scale-${i * 10}`)));
    expect(codes.every((c) => c === 200)).toBe(true);
    const calls = await commandCalls(redis);
    // 300 requests with 300 keys not seen before: a session read each would be 300 GETs (the bound leaves
    // room for background reads of the process, none of them per request)
    expect((calls.get ?? 0) + (calls.mget ?? 0)).toBeLessThan(20);
    expect(await get('not-a-key')).toBe(403); // a key the directory lacks is still refused
  });

  test('FLUSHALL: every session written again within 5 s, no request refused meanwhile', async () => {
    // the gateway's loss detector (every second) has learnt the epoch: an emptied store is noticed from then on
    for (let i = 0; i < 100 && !(await redis.exists('gw:store:epoch')); i++)
      await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 1200));
    await redis.flushall();
    const t0 = Date.now();
    const codes: number[] = [];
    let n = 0;
    while ((await sessionCount(redis)) < KEYS) {
      if (Date.now() - t0 > 20_000) break; // sanity bound; the rule is asserted below
      codes.push(await get(`scale-${n++ % KEYS}`));
      await new Promise((r) => setTimeout(r, 20));
    }
    const refillMs = Date.now() - t0;
    console.log(`[standalone --redis] ${KEYS} sessions written again ${refillMs} ms after FLUSHALL`);
    expect(await sessionCount(redis)).toBe(KEYS);
    expect({ refillMs, within5s: refillMs < 5000 }).toEqual({ refillMs, within5s: true });
    expect(codes.filter((c) => c !== 200)).toEqual([]);
  });
});
