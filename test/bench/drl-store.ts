/**
 * `make bench-drl`, part 2: the DRL's store traffic and memory, counted by Redis itself (INFO commandstats,
 * used_memory, MEMORY USAGE) with one real `gw standalone --redis` process (the only client of its Redis
 * besides this script's INFO calls):
 *   (a) one bucket at full speed (wrk -t1 -c50, 5 s after a 1 s warm-up): store commands per admitted
 *       request, for a limit far above the load at per = 1 s and per = 60 s, and for a limit the load
 *       exceeds (2,000 per 1 s: most requests refused locally);
 *   (b) 10,000 active buckets (one API with `limit_by: header:X-Tenant`, 100 per 60 s, 10,000 tenants
 *       round-robin from vegeta at 10,000 req/s, ~1 request a second each): store commands per heartbeat
 *       period (2 s) and per request, over 4 s after a 2 s warm-up;
 *   (c) memory per active bucket: the gateway's heap and RSS after full GCs (through its inspector, which
 *       nothing attaches to before), before and after (b); Redis used_memory and MEMORY USAGE of the counters.
 * The gateway runs with the sidecar's V8 flags (gw-bench-setup.ts). Bounded: ~1 min.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { startRedis } from '../harness/redis.js';
import { startStandalone, type Standalone } from '../helpers/standalone.js';
import { drive, sleep, startRecorder, type Recorder } from '../helpers/drl-traffic.js';
import {
  apiYaml,
  bounded,
  scratch,
  commandCounts,
  watchSent,
  type SentCommands,
  commandDelta,
  conditions,
  fmt,
  stopAll,
  track,
} from './drl-bench-common.js';
import { GW_BENCH_ENV } from './gw-bench-setup.js';
import { freePort } from '../harness/ports.js';

const run = promisify(execFile);
const VEGETA = join(process.env.GW_TEST_CACHE ?? join(homedir(), '.cache', 'gw-test'), 'bin', 'vegeta');
const TENANTS = Number(process.env.GW_BENCH_DRL_TENANTS ?? 10_000);
const TENANT_RATE = Number(process.env.GW_BENCH_DRL_TENANT_RATE ?? TENANTS);
const HEARTBEAT_S = 2;
const progress = (s: string): boolean => process.stderr.write(`bench-drl store: ${s}\n`);

/** `wrk -t1 -c50` for `seconds`; its req/s. */
async function wrk(url: string, seconds: number): Promise<number> {
  const { stdout } = await run('wrk', ['-t1', '-c50', `-d${seconds}s`, url], { timeout: (seconds + 20) * 1000 });
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN);
}

/** A metric's value from the gateway's /metrics (admin listener). */
async function metric(gw: Standalone, name: string): Promise<number> {
  const text = await (await fetch(`${gw.admin}/metrics`, { signal: AbortSignal.timeout(60_000) })).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([\\d.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN);
}

/**
 * The gateway's memory after full GCs, through its inspector (started with --inspect on `port`; nothing
 * is attached until this call): HeapProfiler.collectGarbage twice, then process.memoryUsage() inside it.
 */
async function memoryAfterGc(port: number): Promise<{ heapUsed: number; rss: number }> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  await new Promise((r, j) => {
    ws.onopen = r;
    ws.onerror = j;
  });
  let id = 0;
  const call = (method: string, params: object = {}): Promise<{ result?: { result?: { value?: string } } }> =>
    new Promise((r) => {
      const mine = ++id;
      ws.addEventListener('message', function on(ev: MessageEvent) {
        const msg = JSON.parse(String(ev.data)) as { id?: number; result?: { result?: { value?: string } } };
        if (msg.id !== mine) return;
        ws.removeEventListener('message', on);
        r(msg);
      });
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const m = await call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    });
    return JSON.parse(m.result!.result!.value!) as { heapUsed: number; rss: number };
  } finally {
    ws.close();
  }
}

const usedMemory = async (admin: Redis): Promise<number> =>
  Number(/used_memory:(\d+)/.exec(String(await admin.info('memory')))?.[1] ?? NaN);

/** Mean MEMORY USAGE of up to `n` DRL counters (gw:{…}:drl). */
async function drlKeyUsage(admin: Redis, n: number): Promise<{ keys: number; mean: number }> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await admin.scan(cursor, 'MATCH', 'gw:*:drl', 'COUNT', 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0' && keys.length < n);
  let total = 0;
  for (const k of keys.slice(0, n)) total += Number(await admin.call('MEMORY', 'USAGE', k));
  return { keys: Math.min(n, keys.length), mean: total / Math.min(n, keys.length) };
}

/** Commands Redis executed in a delta (commandstats, scripts' own calls included). */
const ran = (d: Record<string, number>): number =>
  Object.entries(d).reduce((n, [k, v]) => (k.startsWith('ran:') ? n + v : n), 0);

interface HotRow {
  name: string;
  limit: string;
  wrkRps: number;
  admittedPerS: number;
  commands: Record<string, number>;
}

/** (a) one bucket at full speed on one gateway. */
async function hot(
  gw: Standalone,
  up: Recorder,
  admin: Redis,
  sent: SentCommands,
  name: string,
  limit: string,
): Promise<HotRow> {
  const url = `${gw.gateway}/${name}/x`;
  await wrk(url, 1);
  const n0 = up.times(name).length;
  const c0 = await commandCounts(admin, sent);
  const t = performance.now();
  const wrkRps = await wrk(url, 5);
  const ms = performance.now() - t;
  const commands = commandDelta(c0, await commandCounts(admin, sent));
  const admitted = up.times(name).length - n0;
  return { name, limit, wrkRps, admittedPerS: (admitted / ms) * 1000, commands: { ...commands, admitted } };
}

/** (b) TENANTS buckets at TENANT_RATE req/s in all through vegeta; commands counted over [2 s, 6 s) of an 8 s attack. */
async function tenants(
  gw: Standalone,
  up: Recorder,
  admin: Redis,
  sent: SentCommands,
  dir: string,
): Promise<Record<string, number>> {
  const targets = join(dir, 'targets');
  writeFileSync(
    targets,
    Array.from({ length: TENANTS }, (_, i) => `GET ${gw.gateway}/tenants/x\nX-Tenant: tenant-${i}\n`).join('\n'),
  );
  const attack = run(
    VEGETA,
    [
      'attack',
      `-targets=${targets}`,
      `-rate=${TENANT_RATE}/1s`,
      '-duration=8s',
      '-connections=128',
      '-max-connections=128',
      // beyond what the gateway answers, requests wait in these workers rather than pile up without bound
      '-workers=64',
      '-max-workers=256',
      '-timeout=10s',
      `-output=${join(dir, 'tenants.bin')}`,
    ],
    { timeout: 60_000 },
  );
  await sleep(2000);
  const n0 = up.times('tenants').length;
  const c0 = await commandCounts(admin, sent);
  await sleep(4000);
  const c1 = await commandCounts(admin, sent);
  const n1 = up.times('tenants').length;
  await attack;
  const { stdout } = await run(VEGETA, ['report', '-type=json', join(dir, 'tenants.bin')], { timeout: 30_000 });
  const report = JSON.parse(stdout) as { requests: number; throughput: number; status_codes: Record<string, number> };
  const d = commandDelta(c0, c1);
  const requests = n1 - n0;
  return {
    offered_per_s: TENANT_RATE,
    answered_per_s: report.throughput,
    status_200: report.status_codes['200'] ?? 0,
    requests_measured: requests,
    tenants_per_s_each: requests / 4 / TENANTS,
    commands_sent_per_heartbeat: (d.sent ?? 0) / (4 / HEARTBEAT_S),
    evalsha_per_heartbeat: (d['sent:evalsha'] ?? 0) / (4 / HEARTBEAT_S),
    commands_sent_per_request: (d.sent ?? 0) / requests,
    evalsha_per_request: (d['sent:evalsha'] ?? 0) / requests,
    commands_redis_ran_per_request: ran(d) / requests,
  };
}

async function main(): Promise<void> {
  bounded('bench-drl store', 240);
  console.log(`\nDRL store traffic and memory: ${conditions()}`);
  const redis = track(await startRedis());
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const sent = await watchSent(redis.url);
  const up = await startRecorder();
  const dir = scratch('gw-bench-drl-store-');
  const cfgDir = scratch('gw-bench-drl-cfg-');
  const inspect = await freePort();
  try {
    const apis: [string, number, number, string?][] = [
      ['full1', 1e9, 1],
      ['full60', 1e9, 60],
      ['capped', 2000, 1],
      ['tenants', 100, 60, 'header:X-Tenant'],
      ['warm', 1e9, 1],
    ];
    for (const [name, rate, per, by] of apis)
      writeFileSync(join(dir, `${name}.yaml`), apiYaml(name, up.url, rate, per, by));
    const cfg = join(cfgDir, 'gw.yaml');
    writeFileSync(cfg, `drl_threshold: 0\ndrl_notification_frequency: ${HEARTBEAT_S}\n`);
    const gw = track(
      await startStandalone(
        dir,
        ['--redis', redis.url, '--config', cfg],
        {
          NODE_OPTIONS: `${GW_BENCH_ENV.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:${inspect}`,
        },
        { readyTimeoutMs: 60_000 },
      ),
    );
    await drive({ origin: gw.gateway, path: '/warm/x', rate: 200, ms: 1500, connections: 4 });

    const rows = [
      await hot(gw, up, admin, sent, 'full1', '10⁹ per 1 s'),
      await hot(gw, up, admin, sent, 'full60', '10⁹ per 60 s'),
      await hot(gw, up, admin, sent, 'capped', '2,000 per 1 s'),
    ];
    console.log(`\n(a) one bucket at full speed on one gateway (wrk -t1 -c50, 5 s): ${conditions()}\n`);
    console.log(
      "| limit | wrk req/s | admitted/s | admitted | store commands sent | **sent per admitted request** | commands Redis ran (scripts' included) per admitted | sent, by command | ran, by command |",
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      const c = r.commands;
      const list = (prefix: string): string =>
        Object.entries(c)
          .filter(([k]) => k.startsWith(prefix))
          .map(([k, n]) => `${k.slice(prefix.length)} ${n}`)
          .join(', ');
      console.log(
        `| ${r.limit} | ${Math.round(r.wrkRps)} | ${Math.round(r.admittedPerS)} | ${c.admitted} | ${c.sent ?? 0} | **${fmt((c.sent ?? 0) / c.admitted!, 4)}** | ${fmt(ran(c) / c.admitted!, 4)} | ${list('sent:')} | ${list('ran:')} |`,
      );
    }

    // (c) baseline: the per-client LRU made (its arrays are allocated on first use) with a few tenants
    await drive({
      origin: gw.gateway,
      path: '/tenants/x',
      rate: 50,
      ms: 400,
      connections: 1,
      headers: { 'x-tenant': 'warm' },
    });
    await sleep(500);
    progress('memory before (b)');
    const mem0 = await memoryAfterGc(inspect);
    const used0 = await usedMemory(admin);
    const keys0 = await admin.dbsize();

    progress(`(b) ${TENANTS} tenants at ${TENANT_RATE} req/s`);
    const b = await tenants(gw, up, admin, sent, dir);
    progress('memory after (b)');
    const buckets = await metric(gw, 'gw_client_buckets');
    const mem1 = await memoryAfterGc(inspect);
    const used1 = await usedMemory(admin);
    const keys1 = await admin.dbsize();
    const usage = await drlKeyUsage(admin, 200);
    const active = buckets - 1; // the warm-up tenant was in the baseline
    console.log(
      `\n(b) ${TENANTS} active buckets (limit_by header, 100 per 60 s) at ${TENANT_RATE} req/s in all on one gateway: ${conditions()}\n`,
    );
    console.log('| figure | value |');
    console.log('|---|---|');
    for (const [k, v] of Object.entries(b)) console.log(`| ${k.replace(/_/g, ' ')} | ${fmt(v, 3)} |`);
    console.log(`\n(c) memory per active bucket (${active} buckets held, gw_client_buckets):\n`);
    console.log('| where | before | after | per bucket |');
    console.log('|---|---|---|---|');
    console.log(
      `| gateway heap after full GCs | ${fmt(mem0.heapUsed / 2 ** 20, 1)} MiB | ${fmt(mem1.heapUsed / 2 ** 20, 1)} MiB | ${Math.round((mem1.heapUsed - mem0.heapUsed) / active)} B |`,
    );
    console.log(
      `| gateway RSS after full GCs | ${fmt(mem0.rss / 2 ** 20, 1)} MiB | ${fmt(mem1.rss / 2 ** 20, 1)} MiB | ${Math.round((mem1.rss - mem0.rss) / active)} B |`,
    );
    console.log(
      `| Redis used_memory (${keys1 - keys0} keys added) | ${fmt(used0 / 2 ** 20, 2)} MiB | ${fmt(used1 / 2 ** 20, 2)} MiB | ${Math.round((used1 - used0) / active)} B |`,
    );
    console.log(`| Redis MEMORY USAGE of a DRL counter (mean of ${usage.keys}) | | | ${Math.round(usage.mean)} B |`);
  } finally {
    progress('stopping');
    sent.stop();
    admin.disconnect();
    await stopAll();
    await up.close();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
