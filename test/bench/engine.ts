/**
 * Limiter engine micro-benchmarks (speed), run by run.ts in a child pinned to one core.
 * Prints one JSON object. Argument: a redis:// URL for the Redis-backed figures.
 *   in-process: DRL check, in-memory sliding-log check and a full engine decision (key auth done,
 *     API scope + key scope + quota) against the floor of any async API (an empty async call)
 *   Redis: sliding-log decisions/s with auto-pipelining, latency p50/p99 µs, round trips per decision
 *     (commandstats), against PING at the same concurrency
 *   memory: bytes per active 100/60 sliding-log bucket in process (heap) and in Redis (used_memory)
 *   DRL leasing from Redis: store commands per admitted request (commandstats delta / admitted) for one
 *     bucket at full speed on one gateway; store calls per heartbeat (2 s) with 10,000 active buckets
 *     (one request per bucket per second); bytes per active DRL bucket in process and in Redis
 */
import { Redis } from 'ioredis';
import { systemClock, type Clock } from '../../lib/clock.js';
import { GatewayOptions } from '../../lib/options.js';
import { createStoreClient } from '../../lib/store/redis.js';
import { createEngine } from '../../sidecar/engine/engine.js';
import type { CompiledApi } from '../../contract/config.js';
import { DrlLimiter } from '../../limiters/drl.js';
import { MemoryLeaseCounter, RedisLeaseCounter } from '../../limiters/drl-counter.js';
import { MemorySlidingLog, RedisSlidingLog } from '../../limiters/sliding-log.js';

const url = process.argv[2];
const gc = (globalThis as { gc?: () => void }).gc;

/** ns per call, each awaited (a synchronous answer too, so every figure includes the await). */
async function timeLoop(n: number, f: (i: number) => unknown): Promise<number> {
  for (let i = 0; i < Math.min(n, 200_000); i++) await f(i); // warm-up (JIT)
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await f(i);
  return Number(process.hrtime.bigint() - t) / n; // ns per call
}

function pct(xs: number[], p: number): number {
  return xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
}

async function main(): Promise<void> {
  const out: Record<string, unknown> = {};
  const clock: Clock = systemClock;
  const N = 2_000_000;
  const floor = async (): Promise<number> => 0;
  out.async_floor_ns = await timeLoop(N, floor);

  const drl = new DrlLimiter({ clock, counter: new MemoryLeaseCounter(clock), peers: () => 1 });
  const big = { rate: 1e12, per: 1 };
  out.drl_ns = await timeLoop(N, (i) => drl.check(`k${i & 1023}`, big));

  const mem = new MemorySlidingLog(clock, undefined, false);
  // 1024 buckets, one request each per ~1 ms: a short window keeps logs small like a live gateway
  out.memory_log_ns = await timeLoop(N, (i) => mem.check(`k${i & 1023}`, { rate: 1e9, per: 0.05 }));

  const api: CompiledApi = {
    namespace: 'b',
    name: 'b',
    api_id: 'b',
    active: true,
    keyless: false,
    authHeader: 'authorization',
    listenPath: '/b/',
    strip: true,
    endpointRules: [],
    apiLimit: { rate: 1e12, per: 1 },
  };
  const engine = createEngine({
    options: GatewayOptions.parse({}),
    clock,
    config: () => ({ hash: '', apis: [], policies: {} }),
    peers: () => 1,
  });
  // 1,024 keys, each with its own session object (as the session stores return them)
  const keys = Array.from({ length: 1024 }, (_, k) => ({
    keyHash: `h${k}`,
    session: { namespace: 'b', session: { rate: 1e12, per: 1, quota_max: -1 } },
  }));
  out.engine_ns = await timeLoop(N / 2, (i) => engine.check({ api, method: 'GET', path: '/x', ...keys[i & 1023]! }));

  // in-process memory per bucket: 10,000 buckets with a full 100/60 log
  const B = 10_000;
  gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const fill = new MemorySlidingLog(clock, undefined, false);
  for (let b = 0; b < B; b++)
    for (let j = 0; j < 100; j++)
      fill.check(`k:h:${'0'.repeat(56)}${String(b).padStart(8, '0')}`, { rate: 100, per: 60 });
  gc?.();
  out.memory_log_bucket_bytes = (process.memoryUsage().heapUsed - heap0) / B;
  const drlFill = new DrlLimiter({ clock, counter: new MemoryLeaseCounter(clock), peers: () => 1 });
  gc?.();
  const heap1 = process.memoryUsage().heapUsed;
  for (let b = 0; b < B; b++)
    await drlFill.check(`k:h:${'0'.repeat(56)}${String(b).padStart(8, '0')}`, { rate: 100, per: 60 });
  gc?.();
  out.drl_bucket_bytes = (process.memoryUsage().heapUsed - heap1) / B;
  if (!fill.check('keep', { rate: 1, per: 1 }) || !drlFill) throw new Error('unreachable');

  if (url) {
    const admin = new Redis(url);
    await admin.flushall();
    const client = createStoreClient(url, { maxRetriesPerRequest: 1 });
    const closedLoop = async (
      conc: number,
      D: number,
      op: (i: number) => Promise<unknown>,
    ): Promise<{ rps: number; lat: number[] }> => {
      const lat: number[] = [];
      let i = 0;
      const end = performance.now() + D;
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (performance.now() < end) {
            const t = performance.now();
            await op(i++);
            lat.push((performance.now() - t) * 1000);
          }
        }),
      );
      lat.sort((x, y) => x - y);
      return { rps: lat.length / (D / 1000), lat };
    };
    const CONC = 256; // throughput: many decisions in flight share the writes (auto-pipelining)
    const LAT = 16; // latency: a moderate number in flight
    const log = new RedisSlidingLog(client, clock, { transactional: true, smoothingEnabled: true });
    const limit = { rate: 100, per: 60 };
    await closedLoop(CONC, 1000, () => client.ping()); // warm-up
    await closedLoop(CONC, 1000, (i) => log.check(`k:h:${i & 4095}`, limit)); // warm-up
    // two interleaved rounds, the best of each kept (the machine is shared)
    const best = (
      a: { rps: number; lat: number[] } | undefined,
      b: { rps: number; lat: number[] },
    ): { rps: number; lat: number[] } => (a && a.rps >= b.rps ? a : b);
    let ping: { rps: number; lat: number[] } | undefined;
    let r: { rps: number; lat: number[] } | undefined;
    let stats = '';
    for (let round = 0; round < 2; round++) {
      ping = best(ping, await closedLoop(CONC, 2000, () => client.ping()));
      await admin.config('RESETSTAT');
      const rr = await closedLoop(CONC, 2000, (i) => log.check(`k:h:${i & 4095}`, limit));
      if (!r || rr.rps > r.rps) stats = String(await admin.info('commandstats'));
      r = best(r, rr);
    }
    if (!ping || !r) throw new Error('unreachable');
    const pingLat = await closedLoop(LAT, 1500, () => client.ping());
    const calls = [...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].filter(([, c]) => c !== 'info' && c !== 'config');
    const rl = await closedLoop(LAT, 1500, (i) => log.check(`k:h:${i & 4095}`, limit));
    const commands = Object.fromEntries(calls.map(([, c, n]) => [c!, Number(n)]));
    out.redis = {
      concurrency: CONC,
      ping_rps: ping.rps,
      log_rps: r.rps,
      log_p50_us: pct(r.lat, 0.5),
      log_p99_us: pct(r.lat, 0.99),
      lat_concurrency: LAT,
      lat_p50_us: pct(rl.lat, 0.5),
      lat_p99_us: pct(rl.lat, 0.99),
      ping_lat_p50_us: pct(pingLat.lat, 0.5),
      evalsha_per_decision: (commands.evalsha ?? 0) / r.lat.length,
      commands,
    };
    // Redis memory per bucket: 1,000 buckets with a full 100/60 log (the sliding-log script writes them)
    await admin.flushall();
    const m0 = Number(/used_memory:(\d+)/.exec(String(await admin.info('memory')))![1]);
    const now = Date.now();
    const fixed: Clock = { now: () => now };
    const filler = new RedisSlidingLog(client, fixed, { transactional: true, smoothingEnabled: false });
    const ops: Promise<unknown>[] = [];
    for (let b = 0; b < 1000; b++)
      for (let j = 0; j < 100; j++) ops.push(filler.check(`k:h:${'0'.repeat(56)}${String(b).padStart(8, '0')}`, limit));
    await Promise.all(ops);
    const m1 = Number(/used_memory:(\d+)/.exec(String(await admin.info('memory')))![1]);
    out.redis_log_bucket_bytes = (m1 - m0) / 1000;
    out.redis_log_bucket_memory_usage = await admin.call('MEMORY', 'USAGE', `gw:{k:h:${'0'.repeat(56)}00000001}:log`);
    out.drl_redis = await drlRedis(admin, client);
    client.disconnect();
    admin.disconnect();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

/** Store commands counted by Redis between `f`'s start and end. */
async function commandsDuring(admin: Redis, f: () => Promise<void>, only?: string): Promise<number> {
  const calls = async (): Promise<number> =>
    [...String(await admin.info('commandstats')).matchAll(/cmdstat_(\w+):calls=(\d+)/g)]
      .filter(([, c]) => c !== 'info' && c !== 'config' && (only === undefined || c === only))
      .reduce((n, [, , k]) => n + Number(k), 0);
  const before = await calls();
  await f();
  return (await calls()) - before - (only === undefined ? 1 : 0); // the INFO of `before` is counted by the second read
}

async function drlRedis(admin: Redis, client: ReturnType<typeof createStoreClient>): Promise<Record<string, number>> {
  await admin.flushall();
  const clock = systemClock;
  // one bucket at full speed on one gateway: admitted per second and store commands per admitted request
  const hot = new DrlLimiter({ clock, counter: new RedisLeaseCounter(client), peers: () => 1 });
  const big = { rate: 1e9, per: 60 };
  let admitted = 0;
  let ms = 0;
  await admin.config('RESETSTAT');
  const commands = await commandsDuring(admin, async () => {
    const t = performance.now();
    while (performance.now() - t < 2000) {
      for (let i = 0; i < 1000; i++) {
        const r = hot.check('k:hot', big);
        if ((r instanceof Promise ? await r : r).allowed) admitted++;
      }
      await new Promise((r) => setImmediate(r));
    }
    ms = performance.now() - t;
  });
  await hot.stop();
  // 10,000 buckets, one request each per second for two heartbeat periods (2 s each), limit 100 per 60 s:
  // store calls per heartbeat (leases and give-backs), and per request
  const many = new DrlLimiter({ clock, counter: new RedisLeaseCounter(client), peers: () => 1 });
  const B = 10_000;
  let requests = 0;
  const perHeartbeat = await commandsDuring(
    admin,
    async () => {
      const t = performance.now();
      for (let round = 0; round < 4; round++) {
        const due = t + round * 1000;
        if (due > performance.now()) await new Promise((r) => setTimeout(r, due - performance.now()));
        const rs: Promise<unknown>[] = [];
        for (let b = 0; b < B; b++) {
          const r = many.check(`k:h:${b}`, { rate: 100, per: 60 });
          requests++;
          if (r instanceof Promise) rs.push(r);
        }
        await Promise.all(rs);
        many.sweep();
      }
    },
    'evalsha',
  );
  // memory: in process (10,000 lease states) and in Redis (the counters those leases wrote)
  gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const fill = new DrlLimiter({ clock, counter: new RedisLeaseCounter(client), peers: () => 1 });
  const used0 = Number(/used_memory:(\d+)/.exec(String(await admin.info('memory')))![1]);
  const rs: Promise<unknown>[] = [];
  for (let b = 0; b < B; b++) {
    const r = fill.check(`k:h:${'0'.repeat(56)}${String(b).padStart(8, '0')}`, { rate: 100, per: 60 });
    if (r instanceof Promise) rs.push(r);
  }
  await Promise.all(rs);
  gc?.();
  const heapPerBucket = (process.memoryUsage().heapUsed - heap0) / B;
  const used1 = Number(/used_memory:(\d+)/.exec(String(await admin.info('memory')))![1]);
  const usage = Number(await admin.call('MEMORY', 'USAGE', `gw:{k:h:${'0'.repeat(56)}00000001}:drl`));
  if (fill.size !== B) throw new Error(`expected ${B} lease states, got ${fill.size}`);
  return {
    hot_admitted_per_s: (admitted / ms) * 1000,
    hot_commands_per_admitted: commands / admitted,
    buckets: B,
    round_trips_per_heartbeat: perHeartbeat / 2,
    round_trips_per_request: perHeartbeat / requests,
    bucket_bytes_process: heapPerBucket,
    bucket_bytes_redis: (used1 - used0) / B,
    bucket_memory_usage: usage,
  };
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
