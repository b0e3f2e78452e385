/**
 * `make bench-scale`, controller part: `gw controller` idle with GW_BENCH_CONTROLLER_KEYS AccessKeys (20,000)
 * and GW_BENCH_CONTROLLER_APIS ApiDefinitions (2,000) in one namespace, on the test harness's own
 * kube-apiserver + etcd and redis-server. Everything is created through the API server first, then the
 * controller starts, reconciles it all (time reported), and is measured idle over
 * GW_BENCH_CONTROLLER_WINDOW seconds (65: one periodic resync included): CPU as a share of one core
 * (/proc/<pid>/stat), RSS now and peak. While the start-up pass over the keys is queued (what a full resync
 * queues), one AccessKey is created: the time until its session is in Redis. Prints each figure, the counters
 * of the idle window (reconciles, writes, resyncs, validations, objects found unchanged), then one JSON line.
 * GW_BENCH_CONTROLLER_RESYNC sets --resync-period (s); GW_BENCH_CONTROLLER_LOG keeps the controller's log;
 * GW_BENCH_CONTROLLER_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" profiles it (written when the bench stops it).
 */
import { cpuTicks, memMb, parallel, stopChild } from './proc.js';
import { spawnBenchController } from './controller-proc.js';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startKube, applyCrds } from '../harness/kube.js';
import { startRedis } from '../harness/redis.js';
import { freePort } from '../harness/ports.js';
import { loadKubeConnection } from '../../lib/kube/connection.js';
import { createKubeApi, resourcePath } from '../../lib/kube/api.js';
import { REFS } from '../../controller/context.js';
import { sha256hex } from '../../lib/hash.js';

const KEYS = Number(process.env.GW_BENCH_CONTROLLER_KEYS ?? 20_000);
const APIS = Number(process.env.GW_BENCH_CONTROLLER_APIS ?? 2_000);
const WINDOW_S = Number(process.env.GW_BENCH_CONTROLLER_WINDOW ?? 65);
/** The controller's --resync-period in seconds (its default, 60, when unset). */
const RESYNC_S = Number(process.env.GW_BENCH_CONTROLLER_RESYNC ?? 0);
const NS = 'bench-scale';

const redisServer = await startRedis();
const kube = await startKube();
try {
  await applyCrds(kube, resolve('crds'));
  const api = createKubeApi(await loadKubeConnection(kube.kubeconfigPath));
  await api.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const t0 = performance.now();
  await parallel(APIS, (i) =>
    api.post(resourcePath(REFS.ApiDefinition, NS), {
      apiVersion: 'gw.io/v1alpha1',
      kind: 'ApiDefinition',
      metadata: { name: `api-${i}` },
      spec: { api_id: `api-${i}`, proxy: { listen_path: `/api-${i}/` } },
    }),
  );
  await parallel(KEYS, (i) =>
    api.post(resourcePath(REFS.AccessKey, NS), {
      apiVersion: 'gw.io/v1alpha1',
      kind: 'AccessKey',
      metadata: { name: `k-${i}` },
      spec: { key_hash: sha256hex(`bench-${i}`), rate: 10, per: 1, access_rights: { [`api-${i % APIS}`]: {} } },
    }),
  );
  console.log(
    `controller: ${APIS} ApiDefinitions + ${KEYS} AccessKeys created in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  );

  const port = await freePort();
  const proc = spawnBenchController({
    kubeconfig: kube.kubeconfigPath,
    namespace: NS,
    redis: redisServer.url,
    metricsPort: port,
    logFile: process.env.GW_BENCH_CONTROLLER_LOG, // the controller's log lines (info) there
    args: RESYNC_S ? ['--resync-period', String(RESYNC_S)] : [],
  });
  const metric = async (name: string): Promise<number> => {
    const r = await request(`http://127.0.0.1:${port}/metrics`);
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(await r.body.text());
    return m ? Number(m[1]) : NaN;
  };
  /** The counters of the window: reconciles per kind, writes per target, resyncs, parses, as `name{labels}` → value. */
  const counters = async (): Promise<Map<string, number>> => {
    const text = await (await request(`http://127.0.0.1:${port}/metrics`)).body.text();
    const out = new Map<string, number>();
    for (const m of text.matchAll(
      /^(gw_controller_(?:reconciles|writes|resyncs|config_parsed|unchanged|validated)_total(?:\{[^}]*\})?) (\S+)$/gm,
    ))
      out.set(m[1]!, Number(m[2]));
    return out;
  };
  const redis = new Redis(redisServer.url);
  const t1 = performance.now();
  // a live change while the start-up pass over every key is queued (what a full resync queues): a new
  // AccessKey's session in Redis (what a sidecar's next lookup reads)
  let depthAtCreate = NaN;
  for (;;) {
    await new Promise((r) => setTimeout(r, 200));
    depthAtCreate = await metric('gw_controller_queue_depth').catch(() => NaN);
    if (depthAtCreate >= KEYS / 4 || performance.now() - t1 > 120_000) break;
  }
  const liveHash = sha256hex('bench-live');
  const t2 = performance.now();
  await api.post(resourcePath(REFS.AccessKey, NS), {
    apiVersion: 'gw.io/v1alpha1',
    kind: 'AccessKey',
    metadata: { name: 'live' },
    spec: { key_hash: liveHash, rate: 10, per: 1, access_rights: { 'api-0': {} } },
  });
  while ((await redis.exists(`gw:session:${liveHash}`)) === 0) {
    if (performance.now() - t2 > 120_000) throw new Error('the live AccessKey was not stored within 120 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  const liveS = (performance.now() - t2) / 1000;
  const depthAfter = await metric('gw_controller_queue_depth').catch(() => NaN);
  console.log(
    `controller: an AccessKey created with ${depthAtCreate} keys queued (start-up pass) stored in Redis after ${liveS.toFixed(2)} s (${depthAfter} still queued; target < 2 s to the sidecars)`,
  );
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    const sessions = await redis.dbsize().catch(() => 0);
    const depth = await metric('gw_controller_queue_depth').catch(() => NaN);
    if (sessions >= KEYS && depth === 0) break;
    if (performance.now() - t1 > 1_800_000) throw new Error(`not reconciled after 30 min (${sessions} sessions)`);
  }
  const reconciledS = (performance.now() - t1) / 1000;
  console.log(`controller: every session in Redis and the queue empty ${reconciledS.toFixed(0)} s after start`);
  await new Promise((r) => setTimeout(r, 10_000)); // statuses and Events settle
  const n0 = await counters();
  const c0 = cpuTicks(proc.pid!);
  const w0 = performance.now();
  const windowStart = Date.now();
  await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
  const cpu = (cpuTicks(proc.pid!) - c0) / 100 / ((performance.now() - w0) / 1000);
  const n1 = await counters();
  const during = Object.fromEntries(
    [...n1].filter(([k, v]) => v !== (n0.get(k) ?? 0)).map(([k, v]) => [k, v - (n0.get(k) ?? 0)]),
  );
  console.log(
    `controller: idle window ${new Date(windowStart).toISOString()} + ${WINDOW_S} s; counters meanwhile: ${JSON.stringify(during)}`,
  );
  const rss = memMb(proc.pid!, 'VmRSS');
  const peak = memMb(proc.pid!, 'VmHWM');
  console.log(
    `controller idle with ${KEYS} keys and ${APIS} APIs over ${WINDOW_S} s: ${(cpu * 100).toFixed(1)} % of a core (target < 5 %); RSS ${rss.toFixed(0)} MB, peak ${peak.toFixed(0)} MB`,
  );
  console.log(
    JSON.stringify({
      controller_keys: KEYS,
      controller_apis: APIS,
      controller_reconciled_s: Math.round(reconciledS),
      controller_live_change_s: Number(liveS.toFixed(2)),
      controller_live_change_queued: [depthAtCreate, depthAfter],
      controller_idle_cpu_pct: Number((cpu * 100).toFixed(1)),
      controller_idle_counters: during,
      controller_rss_mb: Math.round(rss),
      controller_peak_rss_mb: Math.round(peak),
    }),
  );
  await stopChild(proc, 10_000); // SIGTERM first: a --cpu-prof profile is written on the way out
  redis.disconnect();
} finally {
  await kube.stop();
  await redisServer.stop();
}
