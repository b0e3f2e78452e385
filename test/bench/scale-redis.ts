/**
 * `make bench-scale`, Redis part: `gw standalone --redis` with GW_BENCH_REDIS_KEYS AccessKeys (100,000) on the
 * harness's own redis-server (test/harness/redis.ts):
 *   start     time to the ready line and the sessions in Redis at that moment (every key written before it);
 *   refill    FLUSHALL, then the time until every session is back (docs/contract.md#faults: 10,000 keys within 5 s);
 *   requests  requests per second of a 16-connection closed loop against a second gateway with 1,000 keys on
 *             the same redis-server (its own database), interleaved, best of 3 rounds: one key used by every
 *             request ("hot") and a random key of the gateway's own set per request ("spread"); with each, the
 *             gateway's CPU per request (best round) and the Redis commands per request.
 *   restore   the controller's bulk restore after a store loss (controller/restore.ts) of as many AccessKeys, built
 *             in process as the informer cache holds them, into the emptied server: the write part of a
 *             cluster's refill (creating 100,000 AccessKeys through an API server is not practical here).
 * GW_BENCH_REDIS_SKIP=requests,restore (comma list) skips sections. Prints each figure, then one JSON line.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { closedLoop as drive } from './closed-loop.js';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { startStandalone, type Standalone } from '../helpers/standalone.js';
import { startRedis } from '../harness/redis.js';
import { restoreSessions } from '../../controller/restore.js';
import type { KubeObject } from '../../lib/kube/informer.js';

const KEYS = Number(process.env.GW_BENCH_REDIS_KEYS ?? 100_000);
const SMALL = 1000;
const skip = new Set((process.env.GW_BENCH_REDIS_SKIP ?? '').split(',').filter(Boolean));
const results: Record<string, unknown> = {};

/** A directory with one keyed API and `n` AccessKeys (key_hash of `bench-<i>`), 1,000 per file. */
function keysDir(n: number, upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-redis-'));
  writeFileSync(
    join(dir, 'api.yaml'),
    `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: keyed}\nspec:\n  api_id: keyed\n  proxy: {listen_path: /keyed/, target_url: '${upstream}'}\n`,
  );
  for (let f = 0; f < Math.ceil(n / 1000); f++) {
    const docs: string[] = [];
    for (let k = f * 1000; k < (f + 1) * 1000 && k < n; k++)
      docs.push(
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${k}}\nspec: {key_hash: ${sha256hex(`bench-${k}`)}, rate: 1000000, per: 1}\n`,
      );
    writeFileSync(join(dir, `keys-${f}.yaml`), docs.join('---\n'));
  }
  return dir;
}

const sessionCount = async (r: Redis): Promise<number> => {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await r.scan(cursor, 'MATCH', 'gw:session:*', 'COUNT', 5000);
    n += keys.length;
    cursor = next;
  } while (cursor !== '0');
  return n;
};

interface Round {
  /** Requests per second. */
  rps: number;
  /** The gateway's CPU per request (µs): steadier than req/s on a shared machine. */
  cpuUs: number;
  /** Script calls and other commands the redis-server processed per request (the gateway its only client meanwhile). */
  commands: { scripts: number; other: number };
}

const cpuTicks = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime, in clock ticks (100 per second)
};

/** Script calls (EVALSHA, EVAL) and plain commands the redis-server processed (commands inside scripts excluded). */
async function commandsProcessed(r: Redis): Promise<{ scripts: number; other: number }> {
  let scripts = 0;
  let other = 0;
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    if (m[1] === 'evalsha' || m[1] === 'eval') scripts += Number(m[2]);
    else if (m[1] !== 'info') other += Number(m[2]);
  }
  return { scripts, other };
}

/** A closed loop (16 connections) for `ms` against `gw`, each request with `keyOf(i)`. */
async function closedLoop(gw: Standalone, keyOf: (i: number) => string, ms: number, r: Redis): Promise<Round> {
  const c0 = cpuTicks(gw.proc.pid!);
  const k0 = await commandsProcessed(r);
  const done = await drive(gw.gateway, (i) => ({ path: '/keyed/x', headers: { authorization: keyOf(i) } }), ms);
  const cpuUs = ((cpuTicks(gw.proc.pid!) - c0) * 10_000) / done;
  const k1 = await commandsProcessed(r);
  const commands = { scripts: (k1.scripts - k0.scripts) / done, other: (k1.other - k0.other) / done };
  return { rps: done / (ms / 1000), cpuUs, commands };
}

const rssMb = (gw: Standalone, field: 'VmRSS' | 'VmHWM'): number => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${gw.proc.pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
};

const redisServer = await startRedis();
const echo = await startEcho();
const dirs: string[] = [];
const gws: Standalone[] = [];
const big = new Redis(`${redisServer.url}/1`);
try {
  const bigDir = keysDir(KEYS, echo.url);
  dirs.push(bigDir);
  const t0 = performance.now();
  const large = await startStandalone(bigDir, ['--redis', `${redisServer.url}/1`], {}, { readyTimeoutMs: 600_000 });
  gws.push(large);
  const startMs = performance.now() - t0;
  const stored = await sessionCount(big);
  console.log(
    `redis: gw standalone --redis with ${KEYS} keys ready after ${(startMs / 1000).toFixed(1)} s, ${stored} sessions in Redis at the ready line; peak RSS ${rssMb(large, 'VmHWM')} MB`,
  );
  results.redis_start_s = Number((startMs / 1000).toFixed(2));
  results.redis_sessions_at_ready = stored;
  results.redis_peak_rss_mb = rssMb(large, 'VmHWM');

  // FLUSHALL: the loss detector (every second) notices it and writes every session again
  await new Promise((r) => setTimeout(r, 1500));
  const t1 = performance.now();
  await big.flushall();
  let back = 0;
  while ((back = await sessionCount(big)) < KEYS) {
    if (performance.now() - t1 > 120_000) throw new Error(`refill: ${back} of ${KEYS} sessions after 120 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const refillMs = performance.now() - t1;
  console.log(
    `redis: FLUSHALL → all ${KEYS} sessions written again after ${(refillMs / 1000).toFixed(2)} s (detection by the loss detector's 1 s read included; docs/contract.md#faults: 10,000 keys within 5 s)`,
  );
  results.redis_refill_s = Number((refillMs / 1000).toFixed(2));

  if (!skip.has('requests')) {
    const smallDir = keysDir(SMALL, echo.url);
    dirs.push(smallDir);
    const small = await startStandalone(smallDir, ['--redis', `${redisServer.url}/2`], {}, { readyTimeoutMs: 120_000 });
    gws.push(small);
    const cases = {
      hot: [() => 'bench-0', () => 'bench-0'],
      spread: [() => `bench-${Math.floor(Math.random() * SMALL)}`, () => `bench-${Math.floor(Math.random() * KEYS)}`],
    } as const;
    for (const [name, [k1, kN]] of Object.entries(cases)) {
      await closedLoop(small, k1, 1000, big); // warm-up
      await closedLoop(large, kN, 1000, big);
      const best = { small: 0, large: 0 };
      const cpu = { small: Infinity, large: Infinity };
      const commands = { small: { scripts: 0, other: 0 }, large: { scripts: 0, other: 0 } };
      for (let round = 0; round < 3; round++) {
        const a = await closedLoop(small, k1, 3000, big);
        const b = await closedLoop(large, kN, 3000, big);
        best.small = Math.max(best.small, a.rps);
        best.large = Math.max(best.large, b.rps);
        cpu.small = Math.min(cpu.small, a.cpuUs);
        cpu.large = Math.min(cpu.large, b.cpuUs);
        [commands.small, commands.large] = [a.commands, b.commands];
      }
      const ratio = best.large / best.small;
      const cpuRatio = cpu.small / cpu.large;
      console.log(
        `redis: requests, ${name} key: ${SMALL} keys ${best.small.toFixed(0)} req/s, ${KEYS} keys ${best.large.toFixed(0)} req/s: ratio ${ratio.toFixed(2)}×; gateway CPU per request ${cpu.small.toFixed(0)} vs ${cpu.large.toFixed(0)} µs (ratio ${cpuRatio.toFixed(2)}×); Redis script calls per request ${commands.small.scripts.toFixed(2)} vs ${commands.large.scripts.toFixed(2)}, other commands ${commands.small.other.toFixed(2)} vs ${commands.large.other.toFixed(2)}; RSS ${rssMb(small, 'VmRSS')} vs ${rssMb(large, 'VmRSS')} MB`,
      );
      results[`redis_requests_${name}_ratio`] = Number(ratio.toFixed(3));
      results[`redis_requests_${name}_cpu_ratio`] = Number(cpuRatio.toFixed(3));
      results[`redis_requests_${name}_scripts`] = [commands.small.scripts, commands.large.scripts].map((x) =>
        Number(x.toFixed(2)),
      );
    }
  }
  if (!skip.has('restore')) {
    for (const g of gws.splice(0)) await g.stop();
    const keys: KubeObject[] = Array.from({ length: KEYS }, (_, i) => {
      const hash = sha256hex(`bench-${i}`);
      return {
        apiVersion: 'gw.io/v1alpha1',
        kind: 'AccessKey',
        metadata: { name: `k-${i}`, namespace: 'bench', generation: 1, uid: `uid-${i}` },
        spec: { key_hash: hash, rate: 100, per: 1 },
        status: {
          keyHash: hash,
          observedGeneration: 1,
          conditions: [{ type: 'Ready', status: 'True', reason: 'Reconciled' }],
        },
      } as unknown as KubeObject;
    });
    await big.flushall();
    const t2 = performance.now();
    const written = await restoreSessions(big, keys);
    const restoreMs = performance.now() - t2;
    const inStore = await sessionCount(big);
    console.log(
      `redis: controller bulk restore of ${KEYS} AccessKeys (from the informer cache) into an emptied server: ${written} written in ${(restoreMs / 1000).toFixed(2)} s, ${inStore} in Redis`,
    );
    results.redis_controller_restore_s = Number((restoreMs / 1000).toFixed(2));
  }
} finally {
  for (const g of gws) await g.stop();
  big.disconnect();
  echo.server.close();
  await redisServer.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
console.log(JSON.stringify(results));
