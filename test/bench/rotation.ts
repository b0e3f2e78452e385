/**
 * Client rotation (docs/contract.md#limit-by, `limit_by`): an attacker rotating client identities must not grow a
 * gateway's memory without bound, nor slow it down. Run by run.ts (`make bench`) after the proxies' rounds,
 * or alone: `node --expose-gc dist/test/bench/rotation.js <upstream URL>` (wrk, taskset). Prints one JSON
 * object.
 *   in process: heap bytes per per-client bucket (an engine with a `header:` limit on the DRL, filled
 *     with max_client_buckets clients), and the heap after 1,000,000 distinct clients (bounded by the LRU);
 *   over HTTP: one `gw standalone` (pinned like run.ts's) with a keyless API limited `limit_by:
 *     header:X-Client` (never refusing), wrk sending 1,000,000 distinct X-Client values (a counter in wrk's
 *     Lua), against the same wrk script sending one value: throughput ratio (target ≥ 0.9), RSS sampled
 *     throughout against the bound RSS(one identity) + 2 × max_client_buckets × bytes per bucket + 2 ×
 *     --max-semi-space-size (derived in docs/limiter-engine.md), gw_client_buckets and evictions from /metrics.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { systemClock } from '../../lib/clock.js';
import { GatewayOptions } from '../../lib/options.js';
import { createEngine } from '../../sidecar/engine/engine.js';
import type { CompiledApi } from '../../contract/config.js';
import { freePort } from '../harness/ports.js';
import { GW_BENCH_ENV, GW_CLI, GW_NODE_FLAGS } from './gw-bench-setup.js';
import { SIDECAR_SEMI_SPACE_MB } from '../../webhook/node-options.js';
import { rssMb, stopChild } from './proc.js';

const run = promisify(execFile);
const upstream = process.argv[2];
const IDENTITIES = Number(process.env.GW_BENCH_ROTATION_IDENTITIES ?? 1_000_000);
const MAX_CLIENT_BUCKETS = 100_000; // the default
const CHUNK_S = Number(process.env.GW_BENCH_ROTATION_CHUNK_S ?? 10);
const SINGLE_S = Number(process.env.GW_BENCH_ROTATION_SINGLE_S ?? 10);
const CONNS = Number(process.env.GW_BENCH_CONNECTIONS ?? 50);
const PROXY_CPU = process.env.GW_BENCH_PROXY_CPU ?? '0';
const LOAD_CPU = process.env.GW_BENCH_LOAD_CPU ?? '1';
const gc = (globalThis as { gc?: () => void }).gc;

const dirs: string[] = [];
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'gw-bench-rot-'));
  dirs.push(d);
  return d;
}

const API: CompiledApi = {
  namespace: 'bench',
  name: 'rot',
  api_id: 'rot',
  active: true,
  keyless: true,
  authHeader: 'authorization',
  listenPath: '/r/',
  strip: true,
  endpointRules: [],
  apiLimit: { rate: 1e9, per: 60, by: { kind: 'header', name: 'x-client' } },
};

/** Heap bytes per per-client bucket, and the heap (MB) after IDENTITIES clients. */
function inProcess(): { bucket_bytes: number; heap_full_mb: number; heap_after_mb: number; buckets: number } {
  const engine = createEngine({
    options: GatewayOptions.parse({ max_client_buckets: MAX_CLIENT_BUCKETS }),
    clock: systemClock,
    config: () => ({ hash: '', apis: [API], policies: {} }),
    peers: () => 1,
  });
  // X-Client values as wrk sends them
  const check = (i: number): unknown => engine.check({ api: API, method: 'GET', path: '/x', client: () => `c${i}` });
  check(0);
  gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  for (let i = 1; i <= MAX_CLIENT_BUCKETS; i++) check(i);
  gc?.();
  const heapFull = process.memoryUsage().heapUsed;
  for (let i = MAX_CLIENT_BUCKETS + 1; i <= IDENTITIES; i++) check(i);
  gc?.();
  const heapAfter = process.memoryUsage().heapUsed;
  return {
    bucket_bytes: (heapFull - heap0) / MAX_CLIENT_BUCKETS,
    heap_full_mb: heapFull / 2 ** 20,
    heap_after_mb: heapAfter / 2 ** 20,
    buckets: engine.clientBuckets(),
  };
}

/** wrk's Lua: X-Client = c<n>, n counting from GW_ROT_FROM; GW_ROT_ONE=1 sends c1 always. */
const LUA = `
local n = tonumber(os.getenv("GW_ROT_FROM") or "0")
local one = os.getenv("GW_ROT_ONE") == "1"
request = function()
  if one then return wrk.format(nil, nil, { ["X-Client"] = "c1" }) end
  n = n + 1
  return wrk.format(nil, nil, { ["X-Client"] = "c" .. n })
end
`;

async function wrk(
  url: string,
  seconds: number,
  script: string,
  env: NodeJS.ProcessEnv,
): Promise<{ requests: number; rps: number; non2xx: number }> {
  const { stdout } = await run(
    'taskset',
    ['-c', LOAD_CPU, 'wrk', '-t1', `-c${CONNS}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, url],
    { timeout: (seconds + 20) * 1000, env: { ...process.env, ...env } },
  );
  return {
    requests: Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN),
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
  };
}

async function metric(admin: string, name: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

async function overHttp(bucketBytes: number): Promise<Record<string, unknown>> {
  if (!upstream) throw new Error('rotation bench: give the upstream URL');
  const dir = tmp();
  writeFileSync(
    join(dir, 'rot.yaml'),
    `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: rot}
spec:
  use_keyless: true
  proxy: {listen_path: /r/, target_url: '${upstream}'}
  global_rate_limit: {rate: 1000000000, per: 60, limit_by: 'header:X-Client'}
`,
  );
  const cfg = join(tmp(), 'config.yaml');
  writeFileSync(cfg, `max_client_buckets: ${MAX_CLIENT_BUCKETS}\n`);
  const [gp, ap] = [await freePort(), await freePort()];
  const args = [
    'standalone',
    '--resources',
    dir,
    '--config',
    cfg,
    '--listen',
    `127.0.0.1:${gp}`,
    '--admin-listen',
    `127.0.0.1:${ap}`,
  ];
  const c = spawn('taskset', ['-c', PROXY_CPU, process.execPath, ...GW_NODE_FLAGS, GW_CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: GW_BENCH_ENV,
  });
  children.push(c);
  let out = '';
  c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  c.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const end = Date.now() + 20_000;
  while (!out.includes('gw standalone ready:')) {
    if (Date.now() > end || c.exitCode !== null) throw new Error(`rotation bench: gw did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = `http://127.0.0.1:${gp}/r/x`;
  const admin = `http://127.0.0.1:${ap}`;
  const script = join(tmp(), 'rot.lua');
  writeFileSync(script, LUA);
  const rssIdle = rssMb(c.pid);

  // one identity: warm-up, then measured (its RSS under load is the base of the bound)
  await wrk(url, 5, script, { GW_ROT_ONE: '1' });
  let rssSingle = 0;
  let sampler = setInterval(() => (rssSingle = Math.max(rssSingle, rssMb(c.pid))), 200);
  const single = await wrk(url, SINGLE_S, script, { GW_ROT_ONE: '1' });
  clearInterval(sampler);

  // IDENTITIES distinct identities, in chunks (each wrk run continues the count)
  let rssRotation = 0;
  sampler = setInterval(() => (rssRotation = Math.max(rssRotation, rssMb(c.pid))), 200);
  let sent = 0;
  let non2xx = 0;
  const t0 = performance.now();
  while (sent < IDENTITIES) {
    const r = await wrk(url, CHUNK_S, script, { GW_ROT_FROM: String(sent) });
    sent += r.requests;
    non2xx += r.non2xx;
  }
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const rotationRps = sent / seconds;

  // one identity again, after: the gateway is as fast as before
  const singleAfter = await wrk(url, SINGLE_S, script, { GW_ROT_ONE: '1' });
  const buckets = await metric(admin, 'gw_client_buckets');
  const evicted = await metric(admin, 'gw_client_buckets_evicted_total');
  await stopChild(c, 5000);
  // docs/limiter-engine.md, "Memory under client rotation": the old generation holds at most twice what is
  // live (V8's largest growing factor for a heap capped under 1 GiB), and the young generation grows to its
  // two semi-spaces' cap once objects survive (every bucket does; one identity's requests leave nothing)
  const bound = rssSingle + (2 * MAX_CLIENT_BUCKETS * bucketBytes) / 2 ** 20 + 2 * SIDECAR_SEMI_SPACE_MB;
  const singleRps = Math.max(single.rps, singleAfter.rps);
  return {
    identities: sent,
    max_client_buckets: MAX_CLIENT_BUCKETS,
    rotation_rps: rotationRps,
    rotation_seconds: seconds,
    single_rps: single.rps,
    single_after_rps: singleAfter.rps,
    ratio: rotationRps / singleRps,
    rss_idle_mb: rssIdle,
    rss_single_mb: rssSingle,
    rss_rotation_max_mb: rssRotation,
    rss_bound_mb: bound,
    semi_space_mb: SIDECAR_SEMI_SPACE_MB,
    client_buckets: buckets,
    evicted,
    errors: non2xx + single.non2xx + singleAfter.non2xx,
  };
}

async function main(): Promise<void> {
  const mem = inProcess();
  const http = await overHttp(mem.bucket_bytes);
  process.stdout.write(JSON.stringify({ in_process: mem, http }) + '\n');
}

main()
  .then(() => process.exit(0))
  .catch((e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  });
