/**
 * `make bench`: the engine's and the proxies' speed figures (docs/benchmarks.md), every one a ratio against a baseline measured in
 * the same run. The throughput targets are checked on simultaneous pairs: the proxy and its baseline loaded
 * at the same moment on the same core, so a slow spell of the host hits both (see simultaneous()); the median
 * over GW_BENCH_SIM_ROUNDS rounds is reported with its range. Sequential rounds measure every target alone
 * (req/s, CPU per request, latency at a fixed rate, RSS), the order reversed every other round. Bounded (a
 * watchdog ends the run after GW_BENCH_DEADLINE_S) and every process it starts is stopped on exit.
 *
 *   Engine, in a child pinned to the proxy core: ns per in-process decision (DRL, in-memory
 *   sliding log, a whole engine decision) against an empty async call; Redis sliding-log decisions/s
 *   with auto-pipelining against PING, latency, round trips per decision; bytes per 100/60 bucket.
 *   Proxies: each pinned with taskset to core GW_BENCH_PROXY_CPU (0), wrk and the upstream
 *   (nginx, a small JSON body) and Redis on GW_BENCH_LOAD_CPU (1); same connections and duration:
 *     direct upstream | nginx reverse proxy with limit_req far above the load | bare node:http + undici
 *     proxy, with the measured gw's V8 flags (and, in a simultaneous pair only, at V8's defaults) | gw (key auth + DRL) | gw (key auth + Redis sliding log, sessions in Redis) | gw (OAuth bearer
 *     token of a client whose policy has the key's limits + DRL; reported as a ratio of the key-auth case)
 *   then added latency at a fixed rate (GW_BENCH_RATE, 2,000 req/s) over direct, and gw's RSS idle, under
 *   load and 10 s after load. `gw standalone` is the process measured: it runs the same gateway runtime as
 *   `gw sidecar` (sidecar/runtime.ts); only the config source differs, and it is off the request path.
 *   Client rotation (rotation.ts; GW_BENCH_ROTATION=0 skips it): 1,000,000 distinct `header:`
 *   identities through one gw against one identity, RSS against the bound from max_client_buckets.
 * Needs wrk and nginx (Debian: apt-get install wrk nginx-light), taskset and redis-server.
 */
import { execFile, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../harness/ports.js';
import {
  BENCH_CLIENT,
  BENCH_KEY,
  GW_BENCH_ENV,
  GW_NODE_FLAGS,
  baselineNode,
  gwStandaloneBench,
} from './gw-bench-setup.js';
import { benchRun, children, pinned, portOpen, tmp, waitFor } from './children.js';
import { cpuSeconds, family, pinTo, rssMb, stopChild } from './proc.js';

const run = promisify(execFile);
const SECONDS = Number(process.env.GW_BENCH_SECONDS ?? 5);
/** wrk warm-up before every measurement, in every round: each proxy sits idle ~60 s while the others run */
const WARM_S = Number(process.env.GW_BENCH_WARM_S ?? 3);
const CONNS = Number(process.env.GW_BENCH_CONNECTIONS ?? 50);
const RATE = Number(process.env.GW_BENCH_RATE ?? 2000);
const PROXY_CPU = process.env.GW_BENCH_PROXY_CPU ?? '0';
const LOAD_CPU = process.env.GW_BENCH_LOAD_CPU ?? '1';
const ROTATION = process.env.GW_BENCH_ROTATION !== '0';
// ~13 s per target and round (warm-up, wrk, fixed rate) × ~10 targets × 3 rounds, ~9 s per simultaneous
// pair × 9 pairs × 5 rounds, the RSS samples after load, plus the rotation case (~2.5 min on a quiet
// machine: 1,000,000 requests at ~10k/s)
const DEADLINE_S = Number(process.env.GW_BENCH_DEADLINE_S ?? (ROTATION ? 1600 : 1300));
/** RSS of each gw target is sampled this long after its last load of the last round */
const AFTER_LOAD_S = 10;
/**
 * GW_BENCH_PAIR=a,b (e.g. drl,compare): only that simultaneous pair, GW_BENCH_SIM_ROUNDS rounds, its ratios
 * printed; no engine micro-benchmarks, sequential rounds or client rotation (a quick check of one ratio).
 */
const PAIR = process.env.GW_BENCH_PAIR?.split(',').map((c) => c.trim());
/** GW_BENCH_CASES=drl,trace_off,…: only these proxy cases (a focused comparison); default all. */
const CASES = PAIR ?? process.env.GW_BENCH_CASES?.split(',').map((c) => c.trim());
const ROUNDS = Number(process.env.GW_BENCH_ROUNDS ?? 3);
/** rounds of the simultaneous pairs (every pair once per round, the order reversed every other round) */
const SIM_ROUNDS = Number(process.env.GW_BENCH_SIM_ROUNDS ?? 5);
/** [measured, baseline, label, target ratio]: the pairs measured simultaneously */
const SIM_PAIRS: [string, string, string, number | undefined][] = [
  ['drl', 'bare', 'gw key auth + DRL × bare', 0.95],
  ['drl', 'bare_default', "gw key auth + DRL × bare at V8's defaults", undefined],
  ['log', 'bare', 'gw key auth + Redis sliding log × bare', 0.6],
  ['sentinel', 'log', 'gw key auth + Redis sentinel × Redis sliding log', undefined],
  ['drl', 'compare', 'gw DRL, this build × the compared build', undefined],
  ['oauth', 'drl', 'gw OAuth bearer × gw key auth (DRL)', 0.95],
  ['trace_off', 'drl', 'gw DRL, tracing off × gw DRL', 0.98],
  ['trace_001', 'drl', 'gw DRL, spans at sampling_ratio 0.01 × gw DRL', 0.95],
  ['access_logs', 'drl', 'gw DRL, access logs on × gw DRL', 0.9],
];
const started = Date.now();
/** the gateway configuration of the two Redis cases: the sliding log, and its sentinel variant */
const LOG_CONFIG = 'enable_kv_rolling_limiter: true\n';
const SENTINEL_CONFIG = 'enable_sentinel_rate_limiter: true\n';

benchRun('gw bench', DEADLINE_S);

function nginxConf(dir: string, name: string, server: string, http = ''): string {
  const conf = join(dir, `${name}.conf`);
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
user root root;
pid ${dir}/${name}.pid;
error_log ${dir}/${name}-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path ${dir}/${name}-body; proxy_temp_path ${dir}/${name}-proxy;
  fastcgi_temp_path ${dir}/${name}-fcgi; uwsgi_temp_path ${dir}/${name}-uwsgi; scgi_temp_path ${dir}/${name}-scgi;
  ${http}
  server { ${server} }
}
`,
  );
  return conf;
}

interface Wrk {
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

function ms(v: string, unit: string): number {
  return unit === 'us' ? Number(v) / 1000 : unit === 's' ? Number(v) * 1000 : Number(v);
}

async function wrk(url: string, seconds: number, auth?: string): Promise<Wrk> {
  const args = [
    '-c',
    LOAD_CPU,
    'wrk',
    '-t1',
    `-c${CONNS}`,
    `-d${seconds}s`,
    '--latency',
    '--timeout',
    '5s',
    ...(auth ? ['-H', `authorization: ${auth}`] : []),
    url,
  ];
  const { stdout } = await run('taskset', args, { timeout: (seconds + 15) * 1000 });
  const lat = (p: string): number => {
    const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(stdout);
    return m ? ms(m[1]!, m[2]!) : NaN;
  };
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
    requests: Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN),
    p50: lat('50'),
    p99: lat('99'),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
    errors: [...stdout.matchAll(/(connect|read|write|timeout) (\d+)/g)].reduce((s, m) => s + Number(m[2]), 0),
  };
}

interface Fixed {
  n: number;
  errors: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** vegeta (test/servers/build-bench-tools.sh): a constant-rate, open-loop load generator. */
const VEGETA = join(process.env.GW_TEST_CACHE ?? join(homedir(), '.cache', 'gw-test'), 'bin', 'vegeta');

interface VegetaReport {
  requests: number;
  latencies: Record<'50th' | '90th' | '99th' | 'max', number>;
  status_codes: Record<string, number>;
}

/** RATE req/s open loop on the load CPU over 64 keep-alive connections: 1 s warm-up, then 4 s measured. */
async function fixedRate(origin: string, path: string, auth?: string): Promise<Fixed> {
  const dir = tmp('gw-bench-vegeta-');
  const targets = join(dir, 'targets');
  writeFileSync(targets, `GET ${origin}${path}\n${auth ? `authorization: ${auth}\n` : ''}`);
  const attack = (seconds: number, out: string): Promise<unknown> =>
    run(
      'taskset',
      [
        '-c',
        LOAD_CPU,
        VEGETA,
        'attack',
        `-targets=${targets}`,
        `-rate=${RATE}`,
        `-duration=${seconds}s`,
        '-connections=64',
        '-max-connections=64',
        '-timeout=5s',
        `-output=${out}`,
      ],
      { timeout: (seconds + 15) * 1000 },
    );
  await attack(1, join(dir, 'warm.bin'));
  await attack(4, join(dir, 'run.bin'));
  const { stdout } = await run(VEGETA, ['report', '-type=json', join(dir, 'run.bin')], { timeout: 30_000 });
  const r = JSON.parse(stdout) as VegetaReport;
  const ok = Object.entries(r.status_codes).reduce((s, [code, n]) => s + (code.startsWith('2') ? n : 0), 0);
  const msOf = (ns: number): number => ns / 1e6;
  return {
    n: r.requests,
    errors: r.requests - ok,
    p50: msOf(r.latencies['50th']),
    p90: msOf(r.latencies['90th']),
    p99: msOf(r.latencies['99th']),
    max: msOf(r.latencies.max),
  };
}

interface Target {
  name: string;
  origin: string;
  path: string;
  auth?: string;
  pid?: number;
  rssIdle?: number;
}

interface Row {
  t: Target;
  /** best of the rounds (highest req/s) */
  w: Wrk;
  /** CPU µs the proxy process spent per request (lowest of the rounds: the least disturbed) */
  cpuUs: number;
  /** every round's req/s */
  rounds: number[];
  /** fixed-rate latency: each percentile the lowest of the rounds (the least disturbed) */
  f: Fixed;
  /** CPU µs per request at the fixed rate (same offered load for every proxy; lowest of the rounds) */
  cpuFixedUs: number;
  rssIdle?: number;
  rssLoad?: number;
  /** RSS AFTER_LOAD_S after the last load (gw targets, last round) */
  rssAfter?: number;
}

async function measureRound(t: Target, row: Row | undefined): Promise<Row> {
  // warm-up (JIT, pools, caches) in every round: after an idle period in which V8's memory reducer handed
  // the heap back, gw's heap grows back first
  await wrk(t.origin + t.path, WARM_S, t.auth);
  let rssLoad = row?.rssLoad ?? 0;
  const sampler = setInterval(() => (rssLoad = Math.max(rssLoad, rssMb(t.pid))), 200);
  const c0 = cpuSeconds(t.pid);
  const w = await wrk(t.origin + t.path, SECONDS, t.auth);
  const cpuUs = ((cpuSeconds(t.pid) - c0) * 1e6) / w.requests;
  clearInterval(sampler);
  const cf0 = cpuSeconds(t.pid);
  const f = await fixedRate(t.origin, t.path, t.auth);
  const cpuFixedUs = ((cpuSeconds(t.pid) - cf0) * 1e6) / (RATE * 5); // 1 s warm-up + 4 s measured
  console.log(
    `  ${t.name}: ${w.rps.toFixed(0)} req/s, ${Number.isFinite(cpuUs) ? `${cpuUs.toFixed(1)} CPU µs/req (${cpuFixedUs.toFixed(1)} at ${RATE}/s), ` : ''}at ${RATE}/s p50 ${f.p50.toFixed(3)} ms p99 ${f.p99.toFixed(3)} ms, errors ${w.non2xx + w.errors + f.errors}`,
  );
  const rounds = [...(row?.rounds ?? []), w.rps];
  const better = !row || w.rps > row.w.rps;
  return {
    t,
    w: better ? w : row.w,
    cpuUs: row && Number.isFinite(row.cpuUs) ? Math.min(row.cpuUs, cpuUs) : cpuUs,
    cpuFixedUs: row && Number.isFinite(row.cpuFixedUs) ? Math.min(row.cpuFixedUs, cpuFixedUs) : cpuFixedUs,
    rounds,
    f: row
      ? {
          n: row.f.n + f.n,
          errors: row.f.errors + f.errors,
          p50: Math.min(row.f.p50, f.p50),
          p90: Math.min(row.f.p90, f.p90),
          p99: Math.min(row.f.p99, f.p99),
          max: Math.min(row.f.max, f.max),
        }
      : f,
    rssIdle: t.rssIdle ?? row?.rssIdle ?? (t.pid ? rssMb(t.pid) : undefined),
    rssLoad: t.pid ? rssLoad : undefined,
  };
}

/** One simultaneous measurement of a pair: both proxies loaded by their own wrk over the same seconds. */
interface SimRound {
  /** req/s of a / req/s of b */
  rps: number;
  /** requests per CPU-second of a / the same of b (each process's own CPU time over the window) */
  perCpu: number;
  errors: number;
}

/**
 * Two proxies on the same core at the same moment, each under its own wrk (both on the load core): a slow
 * spell of the host hits both alike, which sequential rounds cannot guarantee. Both are saturated, so the
 * scheduler splits the proxy core between them and the req/s ratio is their ratio of cost per request; the
 * requests per CPU-second of each process, read over the same window, give the same ratio without relying on
 * an even split.
 */
async function simultaneous(a: Target, b: Target, bFirst: boolean): Promise<SimRound> {
  const both = (seconds: number): Promise<[Wrk, Wrk]> =>
    bFirst
      ? Promise.all([wrk(b.origin + b.path, seconds, b.auth), wrk(a.origin + a.path, seconds, a.auth)]).then(
          ([y, x]): [Wrk, Wrk] => [x, y],
        )
      : Promise.all([wrk(a.origin + a.path, seconds, a.auth), wrk(b.origin + b.path, seconds, b.auth)]);
  await both(WARM_S);
  const ca = cpuSeconds(a.pid);
  const cb = cpuSeconds(b.pid);
  const [wa, wb] = await both(SECONDS);
  const perCpu = wa.requests / (cpuSeconds(a.pid) - ca) / (wb.requests / (cpuSeconds(b.pid) - cb));
  return { rps: wa.rps / wb.rps, perCpu, errors: wa.non2xx + wa.errors + wb.non2xx + wb.errors };
}

/** A bearer token of the bench's OAuth client (client_credentials), obtained before the measurement. */
async function benchToken(origin: string): Promise<string> {
  const r = await fetch(`${origin}/api/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${BENCH_CLIENT.id}:${BENCH_CLIENT.secret}`).toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  const body = (await r.json()) as { access_token?: string };
  if (r.status !== 200 || !body.access_token) throw new Error(`bench OAuth token: HTTP ${r.status}`);
  return `Bearer ${body.access_token}`;
}

async function startGw(
  name: string,
  upstream: string,
  opts: { redis?: string; config?: string; cli?: string; oauth?: boolean; nodeOptions?: string },
): Promise<Target> {
  const dir = tmp('gw-bench-res-');
  const args = await gwStandaloneBench(dir, upstream, opts.oauth);
  if (opts.cli) args[0] = opts.cli;
  if (opts.redis) args.push('--redis', opts.redis);
  if (opts.config) {
    const f = join(tmp('gw-bench-cfg-'), 'config.yaml');
    writeFileSync(f, opts.config);
    args.push('--config', f);
  }
  const env = opts.nodeOptions === undefined ? GW_BENCH_ENV : { ...GW_BENCH_ENV, NODE_OPTIONS: opts.nodeOptions };
  const c = pinned(PROXY_CPU, process.execPath, [...GW_NODE_FLAGS, ...args], env);
  await waitFor(name, () => c.out().includes('gw standalone ready:'), 20_000, c.out);
  const origin = /gateway (http:\/\/[^\s]+)/.exec(c.out())![1]!;
  const auth = opts.oauth ? await benchToken(origin) : BENCH_KEY;
  await waitFor(
    `${name} answering 200`,
    async () => (await fetch(`${origin}/api/x`, { headers: { authorization: auth } })).status === 200,
    5_000,
    c.out,
  );
  await new Promise((r) => setTimeout(r, 1000)); // idle
  return { name, origin, path: '/api/x', auth, pid: c.pid, rssIdle: rssMb(c.pid) };
}

/** An OTLP/HTTP sink in this process: answers every POST /v1/traces and counts the spans. */
async function startCollector(): Promise<{ url: string; spans(): number }> {
  const { createServer } = await import('node:http');
  let spans = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      spans += body.split('"spanId"').length - 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans: () => spans };
}

/** What rotation.ts prints. */
interface Rotation {
  in_process: { bucket_bytes: number; heap_full_mb: number; heap_after_mb: number; buckets: number };
  http: {
    identities: number;
    max_client_buckets: number;
    rotation_rps: number;
    rotation_seconds: number;
    single_rps: number;
    single_after_rps: number;
    ratio: number;
    rss_idle_mb: number;
    rss_single_mb: number;
    rss_rotation_max_mb: number;
    rss_bound_mb: number;
    semi_space_mb: number;
    client_buckets: number;
    evicted: number;
    errors: number;
  };
}

const fmt = (n: number, d = 0): string => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const mark = (ok: boolean): string => (ok ? 'met' : 'MISSED');

/** Round-by-round ratio a / b (both measured in the same round): its median, lowest and highest. */
function spread(xs: number[]): { median: number; min: number; max: number } {
  const r = [...xs].sort((x, y) => x - y);
  const mid = r.length >> 1;
  const median = r.length % 2 ? r[mid]! : (r[mid - 1]! + r[mid]!) / 2;
  return { median, min: r[0]!, max: r[r.length - 1]! };
}
function spreadText(xs: number[]): string {
  const x = spread(xs);
  return `${fmt(x.median, 2)} (${fmt(x.min, 2)}–${fmt(x.max, 2)})`;
}

/** GW_BENCH_PAIR: the simultaneous rounds of one pair of targets, and their ratios. */
async function onePair(
  [a, b]: string[],
  targets: Record<string, Target>,
  onProxyCpu: (...measured: Target[]) => void,
): Promise<void> {
  const ta = a === undefined ? undefined : targets[a];
  const tb = b === undefined ? undefined : targets[b];
  if (!ta || !tb)
    throw new Error(
      `GW_BENCH_PAIR=${a},${b}: two of ${Object.keys(targets).join(', ')} (compare needs GW_BENCH_COMPARE)`,
    );
  const xs: SimRound[] = [];
  for (let r = 0; r < SIM_ROUNDS; r++) {
    onProxyCpu(ta, tb);
    const x = await simultaneous(ta, tb, r % 2 === 1);
    xs.push(x);
    console.log(
      `  round ${r + 1}/${SIM_ROUNDS}: req/s ${x.rps.toFixed(3)}, per CPU-second ${x.perCpu.toFixed(3)}, errors ${x.errors}`,
    );
  }
  console.log(`\n| pair | req/s ratio, median (range) | per CPU-second | errors |`);
  console.log(`|---|---|---|---|`);
  console.log(
    `| ${ta.name} × ${tb.name} | ${spreadText(xs.map((x) => x.rps))} | ${spreadText(xs.map((x) => x.perCpu))} | ${xs.reduce((t, x) => t + x.errors, 0)} |`,
  );
  console.log(`run time ${fmt((Date.now() - started) / 1000)} s`);
  await Promise.all(children.map((c) => stopChild(c, 5000)));
}

async function main(): Promise<void> {
  for (const [tool, hint] of [
    ['wrk', 'apt-get install wrk'],
    ['nginx', 'apt-get install nginx-light'],
    ['taskset', 'util-linux'],
    ['redis-server', 'apt-get install redis-server'],
    [VEGETA, 'bash test/servers/build-bench-tools.sh'],
  ] as const) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) throw new Error(`gw bench needs ${tool} (${hint})`);
  }
  const dir = tmp('gw-bench-');
  console.log(
    `gw bench: proxies on CPU ${PROXY_CPU}; wrk, upstream and Redis on CPU ${LOAD_CPU}; wrk -t1 -c${CONNS} -d${SECONDS}s; fixed rate ${RATE} req/s for 4 s (vegeta, 64 connections); load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );

  // upstream: nginx returning a small JSON body
  const upPort = await freePort();
  const up = pinned(LOAD_CPU, 'nginx', [
    '-p',
    dir,
    '-c',
    nginxConf(
      dir,
      'upstream',
      `listen 127.0.0.1:${upPort} reuseport backlog=4096; location / { default_type application/json; return 200 '{"ok":true,"service":"bench"}'; }`,
    ),
  ]);
  await waitFor('upstream nginx', () => portOpen(upPort), 10_000, up.out);
  const upstream = `http://127.0.0.1:${upPort}`;

  const redisPort = await freePort();
  const redis = pinned(LOAD_CPU, 'redis-server', [
    '--port',
    String(redisPort),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
  ]);
  await waitFor('redis-server', () => portOpen(redisPort), 10_000, redis.out);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;

  // ---- the engine
  // GW_BENCH_SKIP_MICRO=1: proxy cases only (a focused comparison); the micro-benchmark figures read n/a
  const skipMicro = process.env.GW_BENCH_SKIP_MICRO === '1' || PAIR !== undefined;
  if (!skipMicro) console.log('engine micro-benchmarks (pinned to the proxy CPU)…');
  const engOut = skipMicro
    ? JSON.stringify({ redis: { commands: {} }, drl_redis: {} })
    : (
        await run(
          'taskset',
          ['-c', PROXY_CPU, process.execPath, '--expose-gc', resolve('dist/test/bench/engine.js'), redisUrl],
          { timeout: 120_000 },
        )
      ).stdout;
  const e = JSON.parse(engOut) as {
    async_floor_ns: number;
    drl_ns: number;
    memory_log_ns: number;
    engine_ns: number;
    memory_log_bucket_bytes: number;
    drl_bucket_bytes: number;
    redis: {
      concurrency: number;
      ping_rps: number;
      log_rps: number;
      log_p50_us: number;
      log_p99_us: number;
      lat_concurrency: number;
      lat_p50_us: number;
      lat_p99_us: number;
      ping_lat_p50_us: number;
      evalsha_per_decision: number;
      commands: Record<string, number>;
    };
    redis_log_bucket_bytes: number;
    redis_log_bucket_memory_usage: number;
    drl_redis: {
      hot_admitted_per_s: number;
      hot_commands_per_admitted: number;
      buckets: number;
      round_trips_per_heartbeat: number;
      round_trips_per_request: number;
      bucket_bytes_process: number;
      bucket_bytes_redis: number;
      bucket_memory_usage: number;
    };
  };

  // the request path's metric writes: hand-written series against prom-client's labelled children
  const metricsOut = skipMicro
    ? JSON.stringify({ ns_per_request: {} })
    : (
        await run('taskset', ['-c', PROXY_CPU, process.execPath, resolve('dist/test/bench/metrics.js')], {
          timeout: 120_000,
        })
      ).stdout;
  const m = JSON.parse(metricsOut) as { ns_per_request: { hand_written: number; prom_client_children: number } };

  // ---- proxies
  const nginxPort = await freePort();
  const ngx = pinned(PROXY_CPU, 'nginx', [
    '-p',
    dir,
    '-c',
    nginxConf(
      dir,
      'proxy',
      `listen 127.0.0.1:${nginxPort} backlog=4096; location / { limit_req zone=bench burst=1000000 nodelay; proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }`,
      `limit_req_zone $binary_remote_addr zone=bench:1m rate=10000000r/s; upstream up { server 127.0.0.1:${upPort}; keepalive 128; }`,
    ),
  ]);
  await waitFor('nginx proxy', () => portOpen(nginxPort), 10_000, ngx.out);
  // the baseline of the targets runs with the measured gw's V8 flags (docs/benchmarks.md, "What the pairs
  // compare"): the young generation's size decides much of a request's cost, so the pair compares the two
  // proxies' work within the same heap; the same bare proxy at V8's defaults is a reported pair of its own
  const bareAt = async (heap: 'sidecar' | 'defaults'): Promise<[number, ChildProcess]> => {
    const port = await freePort();
    const { args, env } = baselineNode([resolve('dist/test/bench/bare-proxy.js'), String(port), upstream], heap);
    const c = pinned(PROXY_CPU, process.execPath, args, env);
    await waitFor(`bare proxy (${heap})`, () => c.out().includes('ready'), 10_000, c.out);
    return [port, c];
  };
  const [barePort, bare] = await bareAt('sidecar');
  const bareDefault = !CASES || CASES.includes('bare_default') ? await bareAt('defaults') : undefined;

  const gwDrl = await startGw('gw key auth + DRL', upstream, {});
  // GW_BENCH_COMPARE=<another build's dist/cli/gw.js>: the same gw case from that build, in the same rounds
  // (the DRL case; with GW_BENCH_COMPARE_CASE=redis the Redis sliding-log case); GW_BENCH_COMPARE_NODE_OPTIONS
  // replaces that process's NODE_OPTIONS (a flag compared on one build)
  const compare = process.env.GW_BENCH_COMPARE;
  const compareNodeOptions = process.env.GW_BENCH_COMPARE_NODE_OPTIONS;
  const compareCase = process.env.GW_BENCH_COMPARE_CASE ?? 'drl';
  if (!['drl', 'redis', 'sentinel'].includes(compareCase))
    throw new Error(`GW_BENCH_COMPARE_CASE=${compareCase}: one of drl, redis, sentinel`);
  const compareRedis = compareCase === 'redis';
  const compareSentinel = compareCase === 'sentinel';
  const gwCompare = !compare
    ? undefined
    : compareRedis || compareSentinel
      ? await startGw(`gw key auth + Redis ${compareSentinel ? 'sentinel' : 'sliding log'}, ${compare}`, upstream, {
          cli: compare,
          redis: redisUrl,
          config: compareSentinel ? SENTINEL_CONFIG : LOG_CONFIG,
          nodeOptions: compareNodeOptions,
        })
      : await startGw(`gw key auth + DRL, ${compare}`, upstream, { cli: compare, nodeOptions: compareNodeOptions });
  const wanted = (k: string): boolean => !CASES || CASES.includes(k);
  const gwLog = wanted('log')
    ? await startGw('gw key auth + Redis sliding log', upstream, { redis: redisUrl, config: LOG_CONFIG })
    : undefined;
  // the sentinel variant (docs/limiter-engine.md): one store read per request, writes off the request path
  const gwSentinel = wanted('sentinel')
    ? await startGw('gw key auth + Redis sentinel', upstream, { redis: redisUrl, config: SENTINEL_CONFIG })
    : undefined;
  // OAuth (docs/contract.md#oauth-tokens): the same API and limits with a bearer token of an OAuthClient instead of a key
  const gwOAuth = wanted('oauth') ? await startGw('gw OAuth bearer + DRL', upstream, { oauth: true }) : undefined;
  // observability (docs/contract.md#observability), each a ratio of the gw DRL case: trace context only (propagation is always
  // on), spans exported at sampling_ratio 0.01 to a collector in this process, access logs on stdout
  const collector = await startCollector();
  const observability: Record<string, Target> = {};
  if (wanted('trace_off'))
    observability.trace_off = await startGw('gw DRL, tracing off', upstream, {
      config: 'opentelemetry: {enabled: false}\n',
    });
  if (wanted('trace_001'))
    observability.trace_001 = await startGw('gw DRL, spans at sampling_ratio 0.01', upstream, {
      config: `opentelemetry: {enabled: true, endpoint: ${collector.url}, sampling_ratio: 0.01}\n`,
    });
  if (wanted('access_logs'))
    observability.access_logs = await startGw('gw DRL, access logs on', upstream, {
      config: 'access_logs: {enabled: true}\n',
    });
  const all: Record<string, Target> = {
    direct: { name: 'direct upstream (nginx)', origin: upstream, path: '/x' },
    nginx: { name: 'nginx proxy + limit_req', origin: `http://127.0.0.1:${nginxPort}`, path: '/x', pid: ngx.pid },
    bare: { name: 'bare node:http + undici', origin: `http://127.0.0.1:${barePort}`, path: '/x', pid: bare.pid },
    ...(bareDefault
      ? {
          bare_default: {
            name: "bare node:http + undici, V8's defaults",
            origin: `http://127.0.0.1:${bareDefault[0]}`,
            path: '/x',
            pid: bareDefault[1].pid,
          },
        }
      : {}),
    drl: gwDrl,
    ...(gwCompare ? { compare: gwCompare } : {}),
    ...(gwLog ? { log: gwLog } : {}),
    ...(gwSentinel ? { sentinel: gwSentinel } : {}),
    ...(gwOAuth ? { oauth: gwOAuth } : {}),
    ...observability,
  };
  // the DRL case and the baselines are always measured: every other figure is a ratio of them
  const targets = Object.fromEntries(
    Object.entries(all).filter(([k]) => ['direct', 'nginx', 'bare', 'drl', 'compare'].includes(k) || wanted(k)),
  );
  /**
   * Only the proxies being measured on the proxy core: the others wait on the load core. Idle gateways still
   * wake for timers and GC, and each switch to one evicts the measured process's caches; with ten proxies on
   * one core that cost the larger gw more than the bare proxy (0.90 against 1.06 alone). Unlike a pause
   * (SIGSTOP), a parked proxy keeps its timers and GC current, so it comes back owing nothing.
   */
  const pids = new Set(Object.values(targets).map((t) => t.pid));
  const onProxyCpu = (...measured: Target[]): void => {
    const keep = new Set(measured.map((t) => t.pid));
    for (const t of Object.values(targets)) pinTo(keep.has(t.pid) ? PROXY_CPU : LOAD_CPU, family(t.pid));
  };
  if (PAIR) return onePair(PAIR, targets, onProxyCpu);

  // rounds: every target once per round, interleaved, so a burst of outside load hits them alike;
  // the best round of each is reported
  const rows: Record<string, Row> = {};
  for (let r = 0; r < ROUNDS; r++) {
    console.log(`round ${r + 1}/${ROUNDS}`);
    // the bare proxy at V8's defaults is measured in its simultaneous pair only
    const order = Object.entries(targets).filter(([k]) => k !== 'bare_default');
    if (r % 2 === 1) order.reverse();
    for (const [k, t] of order) {
      onProxyCpu(t);
      rows[k] = await measureRound(t, rows[k]);
      if (r === ROUNDS - 1 && t.origin !== targets.direct!.origin && t.rssIdle !== undefined) {
        await new Promise((res) => setTimeout(res, AFTER_LOAD_S * 1000));
        rows[k]!.rssAfter = rssMb(t.pid);
      }
    }
  }

  // simultaneous pairs: the method of record for the throughput targets (see simultaneous())
  const simPairs = SIM_PAIRS.map(([a, b, label, min]): (typeof SIM_PAIRS)[number] =>
    b !== 'compare' || compareCase === 'drl'
      ? [a, b, label, min]
      : compareRedis
        ? ['log', b, 'gw Redis sliding log, this build × the compared build', min]
        : ['sentinel', b, 'gw Redis sentinel, this build × the compared build', min],
  ).filter(([a, b]) => targets[a] && targets[b]);
  const sim: Record<string, SimRound[]> = {};
  for (let r = 0; r < SIM_ROUNDS && simPairs.length; r++) {
    console.log(`simultaneous pairs, round ${r + 1}/${SIM_ROUNDS}`);
    const order = r % 2 === 1 ? [...simPairs].reverse() : simPairs;
    for (const [a, b, label] of order) {
      // which wrk starts first alternates with the rounds, so a head start favours neither side
      onProxyCpu(targets[a]!, targets[b]!);
      const x = await simultaneous(targets[a]!, targets[b]!, r % 2 === 1);
      (sim[label] ??= []).push(x);
      console.log(`  ${label}: req/s ${x.rps.toFixed(3)}, per CPU-second ${x.perCpu.toFixed(3)}, errors ${x.errors}`);
    }
  }

  // ---- client rotation (its own gw, after the rounds so it disturbs none of them)
  let rot: Rotation | undefined;
  // a focused comparison (GW_BENCH_CASES) runs it only when named: `rotation`
  if (ROTATION && (!CASES || CASES.includes('rotation'))) {
    // the rotation's own gw alone on the proxy core: the proxies measured above are done
    await Promise.all(children.filter((c) => c.pid !== undefined && pids.has(c.pid)).map((c) => stopChild(c, 5000)));
    console.log('client rotation: 1,000,000 header: identities through one gw…');
    const { stdout } = await run(process.execPath, ['--expose-gc', resolve('dist/test/bench/rotation.js'), upstream], {
      timeout: 600_000,
      maxBuffer: 1 << 20,
    });
    rot = JSON.parse(stdout) as Rotation;
  }

  // ---- report
  const paired = (a: Row, b: Row): { median: number; min: number; max: number } =>
    spread(a.rounds.map((x, i) => x / b.rounds[i]!));
  const pairedText = (a: Row, b: Row): string => spreadText(a.rounds.map((x, i) => x / b.rounds[i]!));
  const d = rows.direct!;
  const b = rows.bare!;
  const n = rows.nginx!;
  const lines: string[] = [];
  const p = (s: string): void => void lines.push(s);
  p('');
  p(`## limiter engine (one core)`);
  p(`| figure | value | baseline (same run) | ratio | target |`);
  p(`|---|---|---|---|---|`);
  const perS = (ns: number): number => 1e9 / ns;
  p(
    `| DRL check | ${fmt(e.drl_ns)} ns = ${fmt(perS(e.drl_ns) / 1e6, 2)} M/s | empty async call ${fmt(e.async_floor_ns)} ns | ${fmt(e.drl_ns / e.async_floor_ns, 1)}× the floor | ≥ 1 M/s: ${mark(perS(e.drl_ns) >= 1e6)} |`,
  );
  p(
    `| in-memory sliding log check | ${fmt(e.memory_log_ns)} ns = ${fmt(perS(e.memory_log_ns) / 1e6, 2)} M/s | ″ | ${fmt(e.memory_log_ns / e.async_floor_ns, 1)}× | ≥ 1 M/s: ${mark(perS(e.memory_log_ns) >= 1e6)} |`,
  );
  p(
    `| whole engine decision (API + key scope + quota, DRL) | ${fmt(e.engine_ns)} ns = ${fmt(perS(e.engine_ns) / 1e6, 2)} M/s | ″ | ${fmt(e.engine_ns / e.async_floor_ns, 1)}× | (≥ 1 M/s: ${mark(perS(e.engine_ns) >= 1e6)}) |`,
  );
  p(
    `| Redis sliding log, auto-pipelining, ${e.redis.concurrency} in flight | ${fmt(e.redis.log_rps)} decisions/s | PING ${fmt(e.redis.ping_rps)}/s | ${fmt(e.redis.log_rps / e.redis.ping_rps, 2)} | ≥ 20,000/s: ${mark(e.redis.log_rps >= 20_000)} |`,
  );
  p(
    `| Redis decision latency, ${e.redis.lat_concurrency} in flight | p50 ${fmt(e.redis.lat_p50_us)} µs, p99 ${fmt(e.redis.lat_p99_us)} µs | PING p50 ${fmt(e.redis.ping_lat_p50_us)} µs | p50 ${fmt(e.redis.lat_p50_us / e.redis.ping_lat_p50_us, 2)}× | – |`,
  );
  p(
    `| round trips per Redis decision | ${fmt(e.redis.evalsha_per_decision, 3)} (EVALSHA; inside it ${Object.entries(
      e.redis.commands,
    )
      .filter(([c]) => c !== 'evalsha')
      .map(([c]) => c.toUpperCase())
      .join(
        ', ',
      )}) | – | – | exactly 1: ${mark(Math.abs(e.redis.evalsha_per_decision - 1) < 0.001 && Object.keys(e.redis.commands).every((c) => ['evalsha', 'zremrangebyscore', 'zcard', 'zadd', 'pexpire', 'zrange', 'hmget', 'hset'].includes(c)))} |`,
  );
  p(
    `| DRL leasing from Redis, one bucket at full speed on one gateway | ${fmt(e.drl_redis.hot_admitted_per_s)} admitted/s, ${fmt(e.drl_redis.hot_commands_per_admitted, 4)} store commands per admitted request (commandstats) | – | – | ≤ 0.02 at ≥ 20,000/s: ${mark(e.drl_redis.hot_commands_per_admitted <= 0.02 && e.drl_redis.hot_admitted_per_s >= 20_000)} |`,
  );
  p(
    `| DRL store traffic, ${fmt(e.drl_redis.buckets)} active buckets (1 request each per second, 100/60) | ${fmt(e.drl_redis.round_trips_per_heartbeat)} store round trips (EVALSHA) per heartbeat (2 s) = ${fmt(e.drl_redis.round_trips_per_request, 2)} per request | – | – | ≤ 2 per request (a lease and a give-back): ${mark(e.drl_redis.round_trips_per_request <= 2)} |`,
  );
  p(
    `| bytes per active DRL bucket (100/60) | in process ${fmt(e.drl_redis.bucket_bytes_process)} B; in Redis ${fmt(e.drl_redis.bucket_bytes_redis)} B (MEMORY USAGE ${fmt(e.drl_redis.bucket_memory_usage)} B) | – | – | report |`,
  );
  p(
    `| bytes per active 100/60 sliding-log bucket | in process ${fmt(e.memory_log_bucket_bytes)} B; in Redis ${fmt(e.redis_log_bucket_bytes)} B (MEMORY USAGE ${e.redis_log_bucket_memory_usage} B) | DRL bucket ${fmt(e.drl_bucket_bytes)} B | – | report |`,
  );
  p(
    `| metric writes per request (gw_requests_total, gw_decision_seconds, gw_upstream_seconds) | hand-written series (sidecar/hot-metrics.ts) ${fmt(m.ns_per_request.hand_written)} ns | prom-client labelled children ${fmt(m.ns_per_request.prom_client_children)} ns | ${fmt(m.ns_per_request.prom_client_children / m.ns_per_request.hand_written, 1)}× | report |`,
  );
  p('');
  p(`## proxies (proxy on CPU ${PROXY_CPU}; wrk -t1 -c${CONNS} ${SECONDS} s on CPU ${LOAD_CPU})`);
  p(
    `| proxy | req/s (best of ${ROUNDS}; all rounds) | × bare node (median of the rounds' ratios; range) | × nginx | × direct | CPU µs/req under wrk (× bare) | CPU µs/req at ${RATE}/s (× bare) | wrk p50 / p99 ms | at ${RATE}/s: p50 / p99 ms | added over direct p50 / p99 ms | RSS idle / load / ${AFTER_LOAD_S} s after MB | errors |`,
  );
  p(`|---|---|---|---|---|---|---|---|---|---|---|---|`);
  for (const r of Object.values(rows)) {
    p(
      `| ${r.t.name} | ${fmt(r.w.rps)} (${r.rounds.map((x) => fmt(x)).join(', ')}) | ${pairedText(r, b)} | ${fmt(paired(r, n).median, 2)} | ${fmt(paired(r, d).median, 2)} | ${Number.isFinite(r.cpuUs) ? `${fmt(r.cpuUs, 1)} (${fmt(r.cpuUs / b.cpuUs, 2)})` : '–'} | ${Number.isFinite(r.cpuFixedUs) ? `${fmt(r.cpuFixedUs, 1)} (${fmt(r.cpuFixedUs / b.cpuFixedUs, 2)})` : '–'} | ${fmt(r.w.p50, 2)} / ${fmt(r.w.p99, 2)} | ${fmt(r.f.p50, 3)} / ${fmt(r.f.p99, 3)} | ${r === d ? '–' : `${fmt(r.f.p50 - d.f.p50, 3)} / ${fmt(r.f.p99 - d.f.p99, 3)}`} | ${r.rssIdle !== undefined ? `${fmt(r.rssIdle)} / ${fmt(r.rssLoad ?? NaN)} / ${fmt(r.rssAfter ?? NaN)}` : '–'} | ${r.w.non2xx + r.w.errors + r.f.errors} |`,
    );
  }
  const drl = rows.drl!;
  const log = rows.log;
  p('');
  p(
    `CPU cost per request (less sensitive to other load on the machine): under wrk gw DRL ${fmt(drl.cpuUs, 1)} µs = ${fmt(b.cpuUs / drl.cpuUs, 2)}× bare's capacity, ${fmt(n.cpuUs / drl.cpuUs, 2)}× nginx's; at the same offered ${RATE}/s gw DRL = ${fmt(b.cpuFixedUs / drl.cpuFixedUs, 2)}× bare's capacity${log ? `; gw Redis log ${fmt(log.cpuUs, 1)} µs = ${fmt(b.cpuUs / log.cpuUs, 2)}× bare's, at ${RATE}/s ${fmt(b.cpuFixedUs / log.cpuFixedUs, 2)}×` : ''}`,
  );
  p(
    `sequential rounds (req/s, median of the rounds' paired ratios; the throughput targets are checked on the simultaneous pairs below): gw DRL × bare: ${pairedText(drl, b)}; gw DRL ≥ 0.4× nginx: ${pairedText(drl, n)} ${mark(paired(drl, n).median >= 0.4)}${log ? `; gw Redis log × bare: ${pairedText(log, b)}` : ''}${rows.compare ? `; this build × the compared build (${compareCase}): ${pairedText(compareRedis && log ? log : compareSentinel && rows.sentinel ? rows.sentinel : drl, rows.compare)}` : ''}`,
  );
  const oauth = rows.oauth;
  if (oauth)
    p(
      `OAuth bearer (× gw key auth + DRL, sequential rounds): req/s ${pairedText(oauth, drl)}; CPU µs/req at ${RATE}/s ${fmt(oauth.cpuFixedUs / drl.cpuFixedUs, 3)}× key auth's`,
    );
  const obsTargets: [string, number][] = [
    ['trace_off', 0.98],
    ['trace_001', 0.95],
    ['access_logs', 0.9],
  ];
  const obs = obsTargets.filter(([k]) => rows[k]);
  if (obs.length)
    p(
      `observability (× gw DRL, req/s under wrk, sequential rounds, median (range); CPU µs/req at ${RATE}/s × gw DRL's): ${obs
        .map(([k]) => {
          const r = rows[k]!;
          return `${r.t.name} ${pairedText(r, drl)} (CPU ${fmt(r.cpuFixedUs / drl.cpuFixedUs, 3)}×)`;
        })
        .join('; ')}; spans received by the collector: ${collector.spans()}`,
    );
  if (simPairs.length) {
    p('');
    p(
      `## throughput targets — simultaneous pairs (both proxies on CPU ${PROXY_CPU} at the same time, each under its own wrk -t1 -c${CONNS} ${SECONDS} s on CPU ${LOAD_CPU}; ${SIM_ROUNDS} rounds)`,
    );
    p(
      `| pair | req/s ratio, median (range) | requests per CPU-second ratio, median (range) | target (both medians) | errors |`,
    );
    p(`|---|---|---|---|---|`);
    for (const [, , label, min] of simPairs) {
      const xs = sim[label] ?? [];
      const rps = xs.map((x) => x.rps);
      const cpu = xs.map((x) => x.perCpu);
      const ok = Math.min(spread(rps).median, spread(cpu).median) >= (min ?? 0);
      p(
        `| ${label} | ${spreadText(rps)} | ${spreadText(cpu)} | ${min === undefined ? 'report' : `≥ ${min}: ${mark(ok)}`} | ${xs.reduce((t, x) => t + x.errors, 0)} |`,
      );
    }
  }
  for (const r of [drl, ...(log ? [log] : [])]) {
    const a50 = r.f.p50 - d.f.p50;
    const a99 = r.f.p99 - d.f.p99;
    p(
      `added latency ${r.t.name} at ${RATE}/s: p50 ${fmt(a50, 3)} ms (≤ 0.3 ${mark(a50 <= 0.3)}), p99 ${fmt(a99, 3)} ms (≤ 1.5 ${mark(a99 <= 1.5)}); RSS idle ${fmt(r.rssIdle ?? NaN)} MB (≤ 80 ${mark((r.rssIdle ?? Infinity) <= 80)}), under load ${fmt(r.rssLoad ?? NaN)} MB (≤ 150 ${mark((r.rssLoad ?? Infinity) <= 150)}), ${AFTER_LOAD_S} s after load ${fmt(r.rssAfter ?? NaN)} MB`,
    );
  }
  if (rot) {
    const h = rot.http;
    p('');
    p(
      `## client rotation (${fmt(h.identities)} distinct X-Client values, limit_by header:, DRL, max_client_buckets ${h.max_client_buckets})`,
    );
    p(`| figure | value | baseline (same run) | ratio | target |`);
    p(`|---|---|---|---|---|`);
    p(
      `| throughput, ${fmt(h.identities)} identities | ${fmt(h.rotation_rps)} req/s over ${fmt(h.rotation_seconds)} s | one identity ${fmt(h.single_rps)} req/s before, ${fmt(h.single_after_rps)} after | ${fmt(h.ratio, 2)} (against the better) | ≥ 0.9: ${mark(h.ratio >= 0.9)} |`,
    );
    p(
      `| gw RSS, max while rotating | ${fmt(h.rss_rotation_max_mb)} MB | idle ${fmt(h.rss_idle_mb)} MB, one identity under load ${fmt(h.rss_single_mb)} MB | – | ≤ bound ${fmt(h.rss_bound_mb)} MB = one identity's + 2 × ${h.max_client_buckets} × ${fmt(rot.in_process.bucket_bytes)} B + 2 × ${h.semi_space_mb} MB semi-space: ${mark(h.rss_rotation_max_mb <= h.rss_bound_mb)} |`,
    );
    p(
      `| per-client buckets in process at the end | ${fmt(h.client_buckets)} (${fmt(h.evicted)} evicted) | – | – | = max_client_buckets: ${mark(h.client_buckets === h.max_client_buckets)} |`,
    );
    p(
      `| heap per per-client bucket (in process) | ${fmt(rot.in_process.bucket_bytes)} B; heap ${fmt(rot.in_process.heap_full_mb)} MB with ${h.max_client_buckets} clients, ${fmt(rot.in_process.heap_after_mb)} MB after ${fmt(h.identities)} | – | – | report |`,
    );
    p(`errors (non-2xx): ${h.errors}`);
  }
  p(
    `run time ${fmt((Date.now() - started) / 1000)} s; load average now ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
  console.log(lines.join('\n'));
  await Promise.all(children.map((c) => stopChild(c, 5000)));
  writeFileSync(
    resolve('dist/bench-last.json'),
    JSON.stringify({ at: new Date().toISOString(), engine: e, rows, simultaneous: sim, rotation: rot }, null, 2),
  );
}

main()
  .then(() => process.exit(0))
  .catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
