/**
 * `make bench-scale`: what grows with a deployment, as same-run ratios and figures (docs/benchmarks.md, "`make bench-scale`").
 *   routing   the router alone (sidecar/proxy/router.ts) with 10,000 APIs against 10: the last API and a
 *             random mix, lookups per second, best of interleaved rounds;
 *   http-routing  the same through two gw standalone processes (10 and 10,000 keyless APIs, one echo
 *             upstream): requests per second of a 16-connection closed loop, the median of 5 paired rounds'
 *             ratios (docs/contract.md#scale: routing costs the same whatever the number of APIs; the bar: ≥ 0.95×);
 *   metrics   a /metrics scrape (the gateway's registry) with 10,000 APIs that saw traffic against 10:
 *             time and size;
 *   standalone  gw standalone on a directory of GW_BENCH_SCALE_APIS APIs (10,000) and GW_BENCH_SCALE_KEYS keys
 *             (100,000): start-up time and peak RSS, then one file edited under 500 req/s: the edit's
 *             latency and the p99 meanwhile.
 * GW_BENCH_SCALE_SKIP=standalone (comma list) skips sections. Prints each figure, then one JSON line.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool, request } from 'undici';
import type { CompiledApi } from '../../contract/config.js';
import { route } from '../../sidecar/proxy/router.js';
import { GatewayMetrics } from '../../sidecar/metrics.js';
import { startEcho } from '../../scripts/echo-upstream.js';
import { scaleApiYaml, writeScaleFixture } from './scale-fixture.js';
import { startStandalone } from '../helpers/standalone.js';
import { closedLoop as drive } from './closed-loop.js';
import { threadCpuSeconds } from './proc.js';
import { IMAGE_NODE_OPTIONS } from '../../webhook/node-options.js';

const skip = new Set((process.env.GW_BENCH_SCALE_SKIP ?? '').split(',').filter(Boolean));
const APIS = Number(process.env.GW_BENCH_SCALE_APIS ?? 10_000);
const KEYS = Number(process.env.GW_BENCH_SCALE_KEYS ?? 100_000);
const results: Record<string, unknown> = {};

const api = (i: number): CompiledApi => ({
  namespace: 'default',
  name: `api-${i}`,
  api_id: `api-${i}`,
  active: true,
  keyless: true,
  authHeader: 'authorization',
  listenPath: `/api-${i}/`,
  strip: true,
  endpointRules: [],
});

function lookupsPerSecond(apis: CompiledApi[], paths: string[], n: number): number {
  route(apis, paths[0]!); // the trie is built on first use
  const t = process.hrtime.bigint();
  let hits = 0;
  for (let i = 0; i < n; i++) if (route(apis, paths[i & (paths.length - 1)]!)) hits++;
  const s = Number(process.hrtime.bigint() - t) / 1e9;
  if (hits !== n) throw new Error(`routing: ${n - hits} lookups found no API`);
  return n / s;
}

function routing(): void {
  const small = Array.from({ length: 10 }, (_, i) => api(i));
  const large = Array.from({ length: APIS }, (_, i) => api(i));
  const pick = (count: number): string[] =>
    Array.from({ length: 4096 }, () => `/api-${Math.floor(Math.random() * count)}/orders/42`);
  const cases = {
    last: [[`/api-9/orders/42`], [`/api-${APIS - 1}/orders/42`]],
    random: [pick(10), pick(APIS)],
  } as const;
  for (const [name, [p10, pN]] of Object.entries(cases)) {
    const best = { small: 0, large: 0 };
    for (let round = 0; round < 5; round++) {
      best.small = Math.max(best.small, lookupsPerSecond(small, [...p10], 1_000_000));
      best.large = Math.max(best.large, lookupsPerSecond(large, [...pN], 1_000_000));
    }
    const ratio = best.large / best.small;
    console.log(
      `routing, ${name}: 10 APIs ${(best.small / 1e6).toFixed(2)} M lookups/s, ${APIS} APIs ${(best.large / 1e6).toFixed(2)} M/s: ratio ${ratio.toFixed(2)}× (target ≥ 0.95×)`,
    );
    results[`routing_${name}_ratio`] = Number(ratio.toFixed(3));
  }
}

async function metrics(): Promise<void> {
  for (const n of [10, APIS]) {
    const m = new GatewayMetrics();
    for (let i = 0; i < n; i++) {
      // as the proxy labels them: the first MAX_API_SERIES APIs by api_id, the rest as one
      const label = m.apiLabel(`api-${i}`);
      m.requests.labels({ api: label, code: '2xx' }).inc();
      m.upstream.labels({ api: label }).observe(0.003);
      m.rateLimited.inc({ api: label, scope: 'api' });
    }
    let best = Infinity;
    let bytes = 0;
    for (let round = 0; round < 5; round++) {
      const t = performance.now();
      const text = await m.registry.metrics();
      best = Math.min(best, performance.now() - t);
      bytes = Buffer.byteLength(text);
    }
    console.log(`/metrics with ${n} APIs that saw traffic: ${best.toFixed(1)} ms, ${(bytes / 1e6).toFixed(2)} MB`);
    results[`metrics_${n}_ms`] = Number(best.toFixed(1));
    results[`metrics_${n}_bytes`] = bytes;
  }
}

/** Requests per second of a closed loop (16 connections) over `paths` for `ms`. */
async function closedLoop(origin: string, paths: string[], ms: number): Promise<number> {
  return (await drive(origin, (i) => ({ path: paths[i % paths.length]! }), ms)) / (ms / 1000);
}

/** Through gw standalone: requests per second with 10,000 APIs against 10 (last API, random mix), interleaved. */
async function httpRouting(): Promise<void> {
  const echo = await startEcho();
  const dirs: string[] = [];
  const gws: Awaited<ReturnType<typeof startStandalone>>[] = [];
  try {
    for (const n of [10, APIS]) {
      const dir = mkdtempSync(join(tmpdir(), 'gw-bench-route-'));
      dirs.push(dir);
      for (let i = 0; i < n; i++)
        writeFileSync(
          join(dir, `api-${i}.yaml`),
          `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: api-${i}}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /api-${i}/, target_url: '${echo.url}'}\n`,
        );
      gws.push(await startStandalone(dir, [], {}, { readyTimeoutMs: 300_000 }));
    }
    const [small, large] = gws as [(typeof gws)[0], (typeof gws)[0]];
    const pick = (count: number): string[] =>
      Array.from({ length: 4096 }, () => `/api-${Math.floor(Math.random() * count)}/x`);
    const cases = {
      last: [['/api-9/x'], [`/api-${APIS - 1}/x`]],
      random: [pick(10), pick(APIS)],
    } as const;
    for (const [name, [p10, pN]] of Object.entries(cases)) {
      await closedLoop(small.gateway, [...p10], 1000); // warm-up
      await closedLoop(large.gateway, [...pN], 1000);
      // paired rounds, the order reversed every other round: the ratio of each round, median over the rounds
      const ratios: number[] = [];
      const rps = { small: [] as number[], large: [] as number[] };
      for (let round = 0; round < 5; round++) {
        const first = round % 2 === 0 ? 'small' : 'large';
        const one = async (which: 'small' | 'large'): Promise<void> =>
          void rps[which].push(
            await closedLoop(
              which === 'small' ? small.gateway : large.gateway,
              [...(which === 'small' ? p10 : pN)],
              3000,
            ),
          );
        await one(first);
        await one(first === 'small' ? 'large' : 'small');
        ratios.push(rps.large[round]! / rps.small[round]!);
      }
      ratios.sort((a, b) => a - b);
      const ratio = ratios[2]!;
      console.log(
        `routing through gw standalone, ${name}: 10 APIs ${rps.small.map((x) => x.toFixed(0)).join(', ')} req/s, ${APIS} APIs ${rps.large.map((x) => x.toFixed(0)).join(', ')} req/s: ratio ${ratio.toFixed(2)}× (median of 5 paired rounds, range ${ratios[0]!.toFixed(2)}–${ratios[4]!.toFixed(2)}; target ≥ 0.95×)`,
      );
      results[`http_routing_${name}_ratio`] = Number(ratio.toFixed(3));
    }
  } finally {
    for (const g of gws) await g.stop();
    echo.server.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? NaN;

async function standalone(): Promise<void> {
  const echo = await startEcho();
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-scale-'));
  try {
    const apiYaml = (i: number, listen = `/api-${i}/`): string => scaleApiYaml(i, echo.url, listen);
    writeScaleFixture(dir, APIS, KEYS, echo.url);
    const t0 = performance.now();
    // as the image runs it (Dockerfile NODE_OPTIONS): its start-up GC runs before the listeners open.
    // Without --expose-gc the start-up garbage is collected while serving: a Mark-Compact of ~90 ms in the
    // first seconds (docs/benchmarks.md, "`make bench-scale`").
    const gw = await startStandalone(dir, [], { NODE_OPTIONS: IMAGE_NODE_OPTIONS }, { readyTimeoutMs: 600_000 });
    const startMs = performance.now() - t0;
    const cpu = threadCpuSeconds(gw.proc.pid!);
    const hwm = (): number => {
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${gw.proc.pid}/status`, 'utf8'));
      return m ? Number(m[1]) / 1024 : NaN;
    };
    const others = Object.entries(cpu).filter(([n]) => n !== 'main' && cpu[n]! >= 0.05);
    console.log(
      `standalone: ${APIS} APIs + ${KEYS} keys ready after ${(startMs / 1000).toFixed(1)} s; peak RSS ${hwm().toFixed(0)} MB (target ≤ 5 s); CPU main thread ${(cpu.main ?? 0).toFixed(2)} s, ${others.map(([n, v]) => `${n} ${v.toFixed(2)} s`).join(', ')}; load ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}`,
    );
    results.standalone_main_cpu_s = Number((cpu.main ?? 0).toFixed(2));
    results.standalone_start_s = Number((startMs / 1000).toFixed(1));
    results.standalone_peak_rss_mb = Math.round(hwm());
    // 500 req/s to the last API (open loop), one file edited after 2 s
    const pool = new Pool(gw.gateway, { connections: 32 });
    const latencies: number[] = [];
    /** Latencies of the requests sent before the edit (the gateway settling after its start-up). */
    const beforeEdit: number[] = [];
    let editAt = Infinity;
    let failed = 0;
    const inflight = new Set<Promise<void>>();
    const started = performance.now();
    let sent = 0;
    const timer = setInterval(() => {
      const due = Math.floor((performance.now() - started) / 2);
      for (; sent < due; sent++) {
        const t = performance.now();
        const p = pool
          .request({ method: 'GET', path: `/api-${APIS - 1}/x` })
          .then(async (r) => {
            await r.body.dump();
            if (r.statusCode !== 200) failed++;
          })
          .catch(() => void failed++)
          .finally(() => {
            (t < editAt ? beforeEdit : latencies).push(performance.now() - t);
            inflight.delete(p);
          });
        inflight.add(p);
      }
    }, 5);
    await new Promise((r) => setTimeout(r, 2000));
    const t1 = performance.now();
    editAt = t1;
    writeFileSync(join(dir, 'api-1234.yaml'), apiYaml(1234, '/moved/'));
    for (;;) {
      const r = await request(`${gw.gateway}/moved/x`);
      await r.body.dump();
      if (r.statusCode === 200) break;
      if (performance.now() - t1 > 60_000) throw new Error('the edit was not applied within 60 s');
      await new Promise((res) => setTimeout(res, 20));
    }
    const editMs = performance.now() - t1;
    await new Promise((r) => setTimeout(r, 2000));
    clearInterval(timer);
    await Promise.all([...inflight]);
    await pool.close();
    console.log(
      `standalone: one file edited under 500 req/s applied after ${editMs.toFixed(0)} ms (target ≤ 1 s); p99 ${p99(latencies).toFixed(1)} ms over ${latencies.length} requests from the edit on (target < 50 ms), ${failed} failed; p99 of the ${beforeEdit.length} requests of the 2 s before the edit ${p99(beforeEdit).toFixed(1)} ms`,
    );
    results.standalone_p99_before_edit_ms = Number(p99(beforeEdit).toFixed(1));
    results.standalone_edit_ms = Math.round(editMs);
    results.standalone_p99_ms = Number(p99(latencies).toFixed(1));
    await gw.stop();
  } finally {
    echo.server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (!skip.has('routing')) routing();
if (!skip.has('http-routing')) await httpRouting();
if (!skip.has('metrics')) await metrics();
if (!skip.has('standalone')) await standalone();
console.log(JSON.stringify(results));
