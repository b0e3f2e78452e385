/**
 * `make bench-scale`, sharded config part: GW_BENCH_CLUSTER_APIS ApiDefinitions (10,000) with 20 endpoint rules
 * each in one namespace, on the test harness's own kube-apiserver + etcd and redis-server, with a real
 * `gw controller` and `gw sidecar`. The ApiDefinitions are created through the API server first (reported),
 * then the controller starts: time until every shard is written and until every ApiDefinition is Ready
 * (none refused), shards and bytes, the controller's CPU and RSS meanwhile; a new sidecar serving them all
 * (the last API limited by its last rule); one edit of the last API: the time until the sidecar serves it
 * and the shards rewritten (target: one). Prints each figure, then one JSON line.
 */
import { cpuTicks, memMb, parallel } from './proc.js';
import { spawnBenchController } from './controller-proc.js';
import { ruledApi, type RuledApi } from '../fixtures/ruled-api.js';
import { join, resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'undici';
import { startKube, applyCrds } from '../harness/kube.js';
import { startRedis } from '../harness/redis.js';
import { freePort } from '../harness/ports.js';
import { loadKubeConnection } from '../../lib/kube/connection.js';
import { createKubeApi, resourcePath, type KubeApi } from '../../lib/kube/api.js';
import { REFS } from '../../controller/context.js';
import { startEcho } from '../../scripts/echo-upstream.js';
import { startSidecar } from '../helpers/sidecar.js';

const APIS = Number(process.env.GW_BENCH_CLUSTER_APIS ?? 10_000);
/** The controller's log (info): GW_BENCH_CONTROLLER_LOG, else a temporary file; the edit's timeline is read from it. */
const controllerLog = process.env.GW_BENCH_CONTROLLER_LOG ?? join(tmpdir(), `gw-bench-cluster-${process.pid}.log`);
const NS = 'bench-shards';
const results: Record<string, unknown> = { cluster_apis: APIS };

/** A keyless ApiDefinition with 20 endpoint rules GET /r<r>/items at 2 per 60 s (the last at `lastRate`). */
const apiBody = (i: number, lastRate = 2): RuledApi => ruledApi(i, { lastRate });

interface ConfigMapView {
  metadata: { name: string; resourceVersion: string };
  data?: Record<string, string>;
}

async function configMaps(api: KubeApi): Promise<Map<string, ConfigMapView>> {
  const l = (await api.get(resourcePath(REFS.ConfigMap, NS), {
    labelSelector: 'app.kubernetes.io/managed-by=gw-controller',
  })) as { items: ConfigMapView[] };
  return new Map(l.items.map((c) => [c.metadata.name, c]));
}

/** APIs in the shards the index lists (undefined while a listed shard is missing). */
function apisInShards(cms: Map<string, ConfigMapView>): number | undefined {
  const index = cms.get('gw-config')?.data?.['shards.json'];
  if (!index) return 0;
  let n = 0;
  for (const { name } of (JSON.parse(index) as { shards: { name: string }[] }).shards) {
    const text = cms.get(name)?.data?.['config.json'];
    if (text === undefined) return undefined;
    n += text.match(/"listenPath"/g)?.length ?? 0;
  }
  return n;
}

/** Ready=True and refused counts of the namespace's ApiDefinitions (one page of 500 at a time). */
async function readiness(api: KubeApi): Promise<{ ready: number; refused: number }> {
  let ready = 0;
  let refused = 0;
  let cont: string | undefined;
  do {
    const l = (await api.get(resourcePath(REFS.ApiDefinition, NS), {
      limit: '500',
      ...(cont ? { continue: cont } : {}),
    })) as {
      items: { status?: { conditions?: { type: string; status: string; reason?: string }[] } }[];
      metadata: { continue?: string };
    };
    for (const it of l.items) {
      const c = it.status?.conditions?.find((x) => x.type === 'Ready');
      if (c?.status === 'True') ready++;
      else if (c?.status === 'False') refused++;
    }
    cont = l.metadata.continue || undefined;
  } while (cont);
  return { ready, refused };
}

async function codes(origin: string, path: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await request(`${origin}${path}`);
    await r.body.dump();
    out.push(r.statusCode);
  }
  return out;
}

/**
 * The log lines after `since` (epoch ms) that show an edit's path: the controller's config reconcile (its
 * phases), each ConfigMap written, the sidecar's apply (its phases), each as `+ms what {fields}`.
 */
function editTimeline(since: number, controllerOut: string, sidecarOut: string): string[] {
  const out: [number, string][] = [];
  const scan = (text: string, who: string, wanted: string[]): void => {
    for (const l of text.split('\n')) {
      const m = /"time":(\d+)/.exec(l);
      const msg = /"msg":"([^"]*)"/.exec(l)?.[1];
      if (!m || !msg || Number(m[1]) < since || !wanted.includes(msg)) continue;
      const ms = /"ms":(\{[^}]*\})/.exec(l)?.[1] ?? '';
      const cm = /"configMap":"([^"]*)"/.exec(l)?.[1] ?? '';
      out.push([Number(m[1]) - since, `${who} ${msg}${cm ? ` ${cm}` : ''}${ms ? ` ${ms}` : ''}`]);
    }
  };
  scan(controllerOut, 'controller', ['config reconciled', 'config map updated']);
  scan(sidecarOut, 'sidecar', ['config applied']);
  return out.sort((a, b) => a[0] - b[0]).map(([t, w]) => `+${t} ${w}`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const redisServer = await startRedis();
const kube = await startKube();
const echo = await startEcho();
try {
  await applyCrds(kube, resolve('crds'));
  const api = createKubeApi(await loadKubeConnection(kube.kubeconfigPath));
  await api.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const t0 = performance.now();
  await parallel(APIS, (i) => api.post(resourcePath(REFS.ApiDefinition, NS), apiBody(i)));
  const createS = (performance.now() - t0) / 1000;
  console.log(`cluster: ${APIS} ApiDefinitions × 20 rules created through the API server in ${createS.toFixed(0)} s`);
  results.cluster_create_s = Math.round(createS);

  const port = await freePort();
  const proc = spawnBenchController({
    kubeconfig: kube.kubeconfigPath,
    namespace: NS,
    redis: redisServer.url,
    metricsPort: port,
    logFile: controllerLog,
  });
  const c0 = cpuTicks(proc.pid!);
  const t1 = performance.now();
  let shardsS = NaN;
  let readyS = NaN;
  let last = { ready: 0, refused: 0 };
  while (Number.isNaN(readyS)) {
    await sleep(2000);
    if (Number.isNaN(shardsS) && apisInShards(await configMaps(api).catch(() => new Map())) === APIS)
      shardsS = (performance.now() - t1) / 1000;
    if (!Number.isNaN(shardsS)) {
      last = await readiness(api);
      if (last.ready + last.refused === APIS) readyS = (performance.now() - t1) / 1000;
    }
    if (performance.now() - t1 > 3_600_000) throw new Error(`not compiled after 60 min (${JSON.stringify(last)})`);
  }
  const cpuS = (cpuTicks(proc.pid!) - c0) / 100;
  const cms = await configMaps(api);
  const shards = [...cms.keys()].filter((n) => n !== 'gw-config');
  const bytes = shards.reduce((n, s) => n + Buffer.byteLength(cms.get(s)!.data!['config.json']!), 0);
  console.log(
    `cluster: every API in ${shards.length} shards (${(bytes / 1e6).toFixed(1)} MB) ${shardsS.toFixed(0)} s after the controller started; all ${last.ready} Ready, ${last.refused} refused, after ${readyS.toFixed(0)} s; controller CPU ${cpuS.toFixed(0)} s, RSS ${Math.round(memMb(proc.pid!, 'VmRSS'))} MB (peak ${Math.round(memMb(proc.pid!, 'VmHWM'))} MB)`,
  );
  Object.assign(results, {
    cluster_shards_s: Math.round(shardsS),
    cluster_ready_s: Math.round(readyS),
    cluster_refused: last.refused,
    cluster_shards: shards.length,
    cluster_shard_bytes: bytes,
    cluster_controller_cpu_s: Math.round(cpuS),
    cluster_controller_rss_mb: Math.round(memMb(proc.pid!, 'VmRSS')),
    cluster_controller_peak_rss_mb: Math.round(memMb(proc.pid!, 'VmHWM')),
  });

  const t2 = performance.now();
  const sidecar = await startSidecar({
    ns: NS,
    upstream: echo.url,
    redis: redisServer.url,
    kubeconfig: kube.kubeconfigPath,
    // GW_BENCH_SIDECAR_NODE_OPTIONS: e.g. `--cpu-prof --cpu-prof-dir=DIR` (the profile is written when it stops)
    env: {
      GW_LOG_LEVEL: 'info',
      ...(process.env.GW_BENCH_SIDECAR_NODE_OPTIONS ? { NODE_OPTIONS: process.env.GW_BENCH_SIDECAR_NODE_OPTIONS } : {}),
    },
  });
  try {
    const lastApi = `/api-${APIS - 1}`;
    while ((await codes(sidecar.gw, `${lastApi}/r0/items`, 1))[0] !== 200) {
      if (performance.now() - t2 > 300_000) throw new Error('the sidecar did not serve the last API within 300 s');
      await sleep(100);
    }
    const sidecarS = (performance.now() - t2) / 1000;
    const limited = await codes(sidecar.gw, `${lastApi}/r19/items`, 3);
    console.log(
      `cluster: a new sidecar served the last API ${sidecarS.toFixed(1)} s after its start, RSS ${Math.round(memMb(sidecar.proc.pid!, 'VmRSS'))} MB; its last rule (2 per 60 s) answered ${limited.join(', ')}`,
    );
    if (limited.join() !== '200,200,429') throw new Error(`the last API's rule answered ${limited.join()}`);
    Object.assign(results, {
      cluster_sidecar_s: Number(sidecarS.toFixed(1)),
      cluster_sidecar_rss_mb: Math.round(memMb(sidecar.proc.pid!, 'VmRSS')),
    });

    // one edit of the last API: its last rule raised to 1,000 per 60 s
    const before = await configMaps(api);
    const cur = (await api.get(resourcePath(REFS.ApiDefinition, NS, `api-${APIS - 1}`))) as { metadata: object };
    const t3 = performance.now();
    const editAt = Date.now();
    await api.put(resourcePath(REFS.ApiDefinition, NS, `api-${APIS - 1}`), {
      ...apiBody(APIS - 1, 1000),
      metadata: cur.metadata,
    });
    while ((await codes(sidecar.gw, `${lastApi}/r19/items`, 1))[0] !== 200) {
      if (performance.now() - t3 > 120_000) throw new Error('the edit was not served within 120 s');
      await sleep(20);
    }
    const editS = (performance.now() - t3) / 1000;
    await sleep(3000); // anything else the edit rewrites
    const after = await configMaps(api);
    const rewritten = [...after.keys()].filter(
      (n) => n !== 'gw-config' && before.get(n)?.metadata.resourceVersion !== after.get(n)!.metadata.resourceVersion,
    );
    console.log(
      `cluster: one edit served by the sidecar ${editS.toFixed(2)} s after the write; shards rewritten: ${rewritten.length} (${rewritten.join(', ')})`,
    );
    const timeline = editTimeline(editAt, readFileSync(controllerLog, 'utf8'), sidecar.out());
    console.log(`cluster: the edit's path (ms after the write): ${timeline.join('; ')}`);
    Object.assign(results, {
      cluster_edit_s: Number(editS.toFixed(2)),
      cluster_edit_shards_rewritten: rewritten.length,
    });
  } finally {
    await sidecar.stop();
    proc.kill('SIGKILL');
  }
} finally {
  echo.server.close();
  await kube.stop();
  await redisServer.stop();
}
console.log(JSON.stringify(results));
