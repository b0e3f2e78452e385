/**
 * The sentinel variant under synchronised bursts, through three real `gw standalone --redis` processes on
 * one Redis (docs/limiter-engine.md, "Sentinel overshoot bound"): requests fired at once on every gateway,
 * admissions counted where a user counts them, at the upstream. A window admits at least the allowance (the
 * floor of docs/contract.md#algorithms: nothing is refused while the window has room) and at most
 * ⌊1.1 × allowance⌋: a gateway admits on its sentinel read alone only within its spare lease, and the store
 * decides the rest.
 *   cold: buckets no gateway has seen (every gateway's first requests are claims);
 *   warm: each gateway has sent a few requests of the bucket first, so each holds a spare lease and admits
 *         part of the burst on its read alone;
 *   one: the burst on one gateway (exactly the allowance).
 * Each shape runs on several buckets, so one run of the file is several runs of the burst.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { Pool } from 'undici';
import { freshRedis, redisUrl } from '../helpers/redis.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { sleep, startRecorder, type Recorder } from '../helpers/drl-traffic.js';

/** Concurrent connections per gateway: every request of a gateway's share of the burst on its own. */
const CONNECTIONS = 100;

const api = (name: string, upstream: string, rate: number, per: number): string =>
  `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /${name}/, target_url: '${upstream}/${name}', strip_listen_path: true}\n  global_rate_limit: {rate: ${rate}, per: ${per}}\n`;

describe('sentinel variant: synchronised bursts over three gw standalone processes on one Redis', () => {
  let redis: Redis;
  let up: Recorder;
  let dir: string;
  let cfgDir: string;
  let gws: Standalone[] = [];
  let pools: Pool[] = [];

  const shapes: [string, number, number][] = [];
  for (const i of [1, 2, 3]) {
    shapes.push([`cold50-${i}`, 50, 20], [`cold10-${i}`, 10, 10], [`warm50-${i}`, 50, 20], [`warm10-${i}`, 10, 10]);
  }
  shapes.push(['one50', 50, 20], ['one10', 10, 10]);

  beforeAll(async () => {
    redis = await freshRedis();
    up = await startRecorder();
    dir = tempDir();
    cfgDir = tempDir('gw-sentinel-cfg-');
    for (const [name, rate, per] of shapes) writeFileSync(join(dir, `${name}.yaml`), api(name, up.url, rate, per));
    writeFileSync(join(dir, 'open.yaml'), api('open', up.url, 1_000_000, 1));
    const cfg = join(cfgDir, 'gw.yaml');
    // a loaded machine may take more than the default deadline to answer a burst's store calls: a missed
    // deadline admits (kv_failure_mode open), which is not what is measured here
    writeFileSync(cfg, 'enable_sentinel_rate_limiter: true\nkv_deadline_ms: 10000\n');
    gws = await Promise.all(
      [0, 1, 2].map(() =>
        startStandalone(dir, ['--redis', redisUrl(), '--config', cfg], {}, { readyTimeoutMs: 45_000 }),
      ),
    );
    pools = gws.map((g) => new Pool(g.gateway, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 60_000 }));
    // every connection open and the code paths warm before the bursts
    for (let round = 0; round < 3; round++) await Promise.all(pools.map((p) => fire(p, '/open/x', CONNECTIONS)));
  }, 90_000);

  afterAll(async () => {
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
    await Promise.all(gws.map((g) => g.stop()));
    await up?.close();
    redis?.disconnect();
    if (dir) cleanup(dir);
    if (cfgDir) cleanup(cfgDir);
  });

  /** `n` requests at once on one pool; the statuses. */
  async function fire(pool: Pool, path: string, n: number): Promise<number[]> {
    return Promise.all(
      Array.from({ length: n }, () =>
        pool.request({ path, method: 'GET' }).then(
          async (res) => {
            await res.body.dump();
            return res.statusCode;
          },
          () => 0,
        ),
      ),
    );
  }

  /** 300 requests at once: 100 on each gateway (or all on the first). */
  async function burst(name: string, one = false): Promise<{ upstream: number; ok: number; refused: number }> {
    const statuses = one
      ? await fire(pools[0]!, `/${name}/x`, 300)
      : (await Promise.all(pools.map((p) => fire(p, `/${name}/x`, 100)))).flat();
    await sleep(200); // the last admissions reach the upstream
    return {
      upstream: up.times(name).length,
      ok: statuses.filter((s) => s === 200).length,
      refused: statuses.filter((s) => s === 429).length,
    };
  }

  test('cold buckets: 300 at once over 3 gateways admit the allowance (50 per 20 s, 10 per 10 s), at most 1.1 × it', async () => {
    const got: string[] = [];
    for (const i of [1, 2, 3]) {
      for (const [name, rate] of [
        [`cold50-${i}`, 50],
        [`cold10-${i}`, 10],
      ] as const) {
        const r = await burst(name);
        got.push(`${name} ${r.upstream}`);
        expect(r.upstream).toBeGreaterThanOrEqual(rate);
        expect(r.upstream).toBeLessThanOrEqual(Math.floor(1.1 * rate));
        expect(r.ok).toBe(r.upstream);
        expect(r.ok + r.refused).toBe(300);
      }
    }
    console.log(`sentinel cold bursts (admitted at the upstream): ${got.join(', ')}`);
  }, 60_000);

  test('warm buckets: every gateway holds a spare lease, and a burst over 3 still stays within 1.1 × the allowance', async () => {
    const got: string[] = [];
    for (const i of [1, 2, 3]) {
      for (const [name, rate] of [
        [`warm50-${i}`, 50],
        [`warm10-${i}`, 10],
      ] as const) {
        // two requests a gateway, one after the other, with their log writes landed: each gateway's first is a
        // claim (it brings the lease), its second admitted on its sentinel read
        for (let k = 0; k < 2; k++) {
          for (const p of pools) expect(await fire(p, `/${name}/x`, 1)).toEqual([200]);
          await sleep(50);
        }
        const leases = await redis.keys(`gw:*${name}*:spare`);
        expect(leases).toHaveLength(1);
        expect(await redis.hlen(leases[0]!)).toBe(3);
        const r = await burst(name);
        got.push(`${name} ${r.upstream}`);
        expect(r.upstream).toBeGreaterThanOrEqual(rate);
        expect(r.upstream).toBeLessThanOrEqual(Math.floor(1.1 * rate));
        expect(r.ok + 6).toBe(r.upstream);
      }
    }
    console.log(`sentinel warm bursts (admitted at the upstream, 6 before the burst): ${got.join(', ')}`);
  }, 60_000);

  test('a burst of 300 on one gateway admits exactly the allowance', async () => {
    for (const [name, rate] of [
      ['one50', 50],
      ['one10', 10],
    ] as const) {
      const r = await burst(name, true);
      expect(r.upstream).toBe(rate);
      expect(r.ok).toBe(rate);
    }
  }, 60_000);
});
