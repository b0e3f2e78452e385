/**
 * What the end-to-end suites share (test/e2e/*.e2e.ts): kubectl and helm runs, polling, pods and their
 * cgroups, the in-cluster load client, and the chart values the suites install with.
 */
import { execFile, spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

export const KUBECTL = process.env.GW_E2E_KUBECTL ?? 'kubectl';
export const HELM = process.env.GW_E2E_HELM ?? 'helm';
export const CHART = join(process.cwd(), 'helm', 'gw');
export const GW_NS = 'gw-system';
export const APP_NS = 'app';
export const LOAD_NS = 'load';
export const IMAGE = 'localhost/gw:' + (process.env.GW_IMAGE_TAG ?? 'e2e');
export const ECHO = 'localhost/gw-test/echo:1';
export const SIDECAR_LIMIT = 256 * 1024 * 1024;
export const tmp = mkdtempSync(join(tmpdir(), 'gw-e2e-'));
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
export const figure = (name: string, value: string): void => console.log(`e2e-figure: ${name}: ${value}`);

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(bin: string, args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      args,
      { timeout: opts.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

export async function kubectl(args: string[], input?: string, timeoutMs?: number): Promise<string> {
  const r = await run(KUBECTL, args, { input, timeoutMs });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

export async function kjson<T>(args: string[]): Promise<T> {
  return JSON.parse(await kubectl([...args, '-o', 'json'])) as T;
}

export async function helm(args: string[], timeoutMs = 420_000): Promise<string> {
  const r = await run(HELM, args, { timeoutMs });
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Polls `check` every 500 ms until it returns a value (not undefined) or `secs` pass. */
export async function eventually<T>(secs: number, what: string, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + secs * 1000;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await sleep(500);
  }
  throw new Error(`${what}: not within ${secs} s${last ? ` (last error: ${String(last)})` : ''}`);
}

export interface Pod {
  metadata: { name: string; uid: string; labels?: Record<string, string> };
  spec: {
    containers: {
      name: string;
      image: string;
      securityContext?: { readOnlyRootFilesystem?: boolean; runAsNonRoot?: boolean; runAsUser?: number };
      resources?: { limits?: Record<string, string> };
    }[];
  };
  status: {
    phase: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      containerID?: string;
      lastState?: { terminated?: { reason?: string } };
    }[];
  };
}

export const ready = (p: Pod): boolean =>
  p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

export async function pods(ns: string, selector: string): Promise<Pod[]> {
  return (await kjson<{ items: Pod[] }>(['get', 'pods', '-n', ns, '-l', selector])).items;
}

export interface LoadResult {
  statuses: Record<string, number>;
  errors: number;
  perSecond: Record<string, number>[];
  pods: Record<string, number>;
  ms: number;
}

let podSeq = 0;
/**
 * Runs `command` in a pod of the `load` namespace until it ends; returns its log. Not `kubectl run -i`:
 * attaching races a short container, whose output is then lost.
 */
export async function podRun(
  prefix: string,
  image: string,
  command: string[],
  opts: { env?: Record<string, string>; timeoutSecs?: number } = {},
): Promise<string> {
  const name = `${prefix}-${++podSeq}`;
  const env = Object.entries(opts.env ?? {}).map(([k, v]) => `--env=${k}=${v}`);
  await kubectl([
    '-n',
    LOAD_NS,
    'run',
    name,
    `--image=${image}`,
    '--restart=Never',
    '--image-pull-policy=IfNotPresent',
    ...env,
    '--command',
    '--',
    ...command,
  ]);
  const phase = await eventually(opts.timeoutSecs ?? 180, `${name} finished`, async () => {
    const p = await kjson<Pod>(['-n', LOAD_NS, 'get', 'pod', name]);
    return p.status.phase === 'Succeeded' || p.status.phase === 'Failed' ? p.status.phase : undefined;
  });
  const logs = await kubectl(['-n', LOAD_NS, 'logs', name]);
  assert.equal(phase, 'Succeeded', `${name}: ${logs}`);
  await kubectl(['-n', LOAD_NS, 'delete', 'pod', name, '--wait=false']);
  return logs;
}

/** The load client (echo image, /app/load.js) as a pod in the `load` namespace; its one JSON line. */
export async function load(url: string, opts: string[], timeoutSecs = 180): Promise<LoadResult> {
  const logs = await podRun('load', ECHO, ['node', '/app/load.js', url, ...opts], { timeoutSecs });
  return JSON.parse(logs.trim().split('\n').pop()!) as LoadResult;
}

export const count = (r: LoadResult, code: number): number => r.statuses[String(code)] ?? 0;

/** The working set of a container as the kubelet counts it: usage minus inactive file pages (cgroup v1). */
export function workingSet(pod: Pod, container: string): number | undefined {
  const id = pod.status.containerStatuses?.find((c) => c.name === container)?.containerID?.replace(/^\w+:\/\//, '');
  if (!id) return undefined;
  for (const qos of ['burstable', 'besteffort', '']) {
    const dir = join('/sys/fs/cgroup/memory/kubepods', qos, `pod${pod.metadata.uid}`, id);
    try {
      const usage = Number(readFileSync(join(dir, 'memory.usage_in_bytes'), 'utf8'));
      const inactive = Number(/^total_inactive_file (\d+)$/m.exec(readFileSync(join(dir, 'memory.stat'), 'utf8'))?.[1]);
      return usage - (Number.isFinite(inactive) ? inactive : 0);
    } catch {
      // not this QoS class
    }
  }
  return undefined;
}

export function cgroupLimit(pod: Pod, container: string): number | undefined {
  const id = pod.status.containerStatuses?.find((c) => c.name === container)?.containerID?.replace(/^\w+:\/\//, '');
  if (!id) return undefined;
  for (const qos of ['burstable', 'besteffort', '']) {
    try {
      const f = join('/sys/fs/cgroup/memory/kubepods', qos, `pod${pod.metadata.uid}`, id, 'memory.limit_in_bytes');
      return Number(readFileSync(f, 'utf8'));
    } catch {
      // not this QoS class
    }
  }
  return undefined;
}

export const MB = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** The chart's values for the suites: the built image (or `tag` of it), the bundled Redis, `config`. */
export function values(config: Record<string, unknown>, tag = IMAGE.split(':')[1]): string {
  const file = join(tmp, `values-${Date.now()}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      image: { repository: IMAGE.split(':')[0], tag, pullPolicy: 'IfNotPresent' },
      redis: {
        bundled: {
          enabled: true,
          image: { repository: 'localhost/gw-test/redis', tag: '7', pullPolicy: 'IfNotPresent' },
        },
      },
      facade: { namespace: APP_NS },
      sidecar: { namespaces: [{ name: APP_NS }] },
      config: { gateway_urls: [`http://echo.${APP_NS}.svc`], ...config },
    }),
  );
  return file;
}

/** `helm install` of the chart as release `gw` in GW_NS with `values(config)`, waiting until it is Ready. */
export async function installRelease(config: Record<string, unknown>): Promise<void> {
  await helm([
    'install',
    'gw',
    CHART,
    '-n',
    GW_NS,
    '--create-namespace',
    '-f',
    values(config),
    '--wait',
    '--timeout',
    '6m',
  ]);
}

export const DRL = { drl_threshold: 0, drl_notification_frequency: 0.2 };
export const LOG = { enable_kv_rolling_limiter: true, kv_deadline_ms: 3000 };

/** One response (or failure) of `steadyLoad`, timed by the receiving side: the test's own clock. */
export interface Sample {
  /** when the response ended or the request failed (epoch ms) */
  t: number;
  /** HTTP status; 0 when the request failed without one (`err` says how) */
  status: number;
  /** ms from sending the request to `t` */
  ms: number;
  /** on a failure over a reused keep-alive connection: how long it had been idle in the client's pool (ms) */
  idleMs?: number;
  pod?: string;
  /** a 200's arrival at the echo app (epoch ms, the node's clock): when the gateway admitted it */
  at?: number;
  err?: string;
  /** the value of `recordHeader`, when asked */
  header?: string;
}

export interface SteadyLoad {
  /** stops sending, waits for the requests in flight, returns every sample in the order they ended */
  stop(): Promise<Sample[]>;
  samples: Sample[];
}

/**
 * A fixed rate of requests from the test process (in the cluster's network namespace) to `url`, e.g. a
 * Service's ClusterIP: the node's connections to Services go through kube-proxy's rules like a pod's.
 * Every response is recorded (status, the echo's pod, failures by their error code). `connections`
 * keep-alive sockets (a response with `Connection: close` makes the next request open a new one, which
 * kube-proxy may send to another pod); `fresh: true` opens a connection per request instead.
 */
export function steadyLoad(
  url: string,
  o: { rps: number; connections?: number; fresh?: boolean; headers?: Record<string, string>; recordHeader?: string },
): SteadyLoad {
  // `timeout` makes node's Agent read the server's `Keep-Alive: timeout=N` hint and drop an idle socket
  // 1 s before it (without one it never drops an idle socket and writes onto the one the server is
  // closing: an ECONNRESET); a client of the gateway should honour the hint (docs/helm.md, "Termination")
  const agent = new http.Agent({ keepAlive: !o.fresh, maxSockets: o.connections ?? 8, timeout: 60_000 });
  // when each keep-alive socket went back to the pool: a failure on a reused one says how long it idled
  const freedAt = new WeakMap<import('node:net').Socket, number>();
  agent.on('free', (socket: import('node:net').Socket) => freedAt.set(socket, Date.now()));
  const samples: Sample[] = [];
  const inflight = new Set<Promise<void>>();
  const start = Date.now();
  let n = 0;
  let stopped = false;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const sent = Date.now();
      let idleMs: number | undefined;
      const req = http.get(url, { agent, headers: o.headers, timeout: 10_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          let pod: string | undefined;
          let at: number | undefined;
          if (res.statusCode === 200) {
            try {
              ({ pod, at } = JSON.parse(body) as { pod?: string; at?: number });
            } catch {
              // a 200 that is not the echo's JSON: counted by status
            }
          }
          const h = o.recordHeader ? res.headers[o.recordHeader.toLowerCase()] : undefined;
          samples.push({
            t: Date.now(),
            ms: Date.now() - sent,
            status: res.statusCode ?? 0,
            pod,
            at,
            header: h === undefined ? undefined : String(h),
          });
          resolve();
        });
        res.on('error', (e: NodeJS.ErrnoException) => {
          samples.push({
            t: Date.now(),
            ms: Date.now() - sent,
            status: 0,
            err: `response ${e.code ?? e.message}`,
            idleMs,
          });
          resolve();
        });
      });
      req.on('socket', (socket: import('node:net').Socket) => {
        const f = freedAt.get(socket);
        if (f !== undefined) idleMs = Date.now() - f;
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.on('error', (e: NodeJS.ErrnoException) => {
        samples.push({ t: Date.now(), ms: Date.now() - sent, status: 0, err: e.code ?? e.message, idleMs });
        resolve();
      });
    });
  // each request at its slot on an absolute schedule: a late timer catches up instead of lowering the rate
  const tick = (): void => {
    if (stopped) return;
    const due = Math.floor(((Date.now() - start) * o.rps) / 1000) + 1;
    while (n < due) {
      n++;
      const p = one().finally(() => inflight.delete(p));
      inflight.add(p);
    }
    setTimeout(tick, Math.max(1, Math.floor(1000 / o.rps / 2)));
  };
  tick();
  return {
    samples,
    async stop() {
      stopped = true;
      while (inflight.size) await Promise.all([...inflight]);
      agent.destroy();
      return samples;
    },
  };
}

/** Samples that failed: no HTTP status, or a 5xx. */
export const failures = (s: Sample[]): Sample[] => s.filter((x) => x.status === 0 || x.status >= 500);

/** Counts of each status (failures without a status under their error code). */
export function tally(s: Sample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of s) {
    const k = x.status ? String(x.status) : (x.err ?? 'error');
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/**
 * 200s per window of `ms` from `from` (epoch ms), complete windows only: the DRL's admitted counts. A 200
 * counts in the window of its arrival at the echo app (`at`, the moment the gateway let it through), not
 * of its response at the test: on a loaded machine responses come late by up to seconds, which moves
 * admissions across window edges.
 */
export function admittedPerWindow(s: Sample[], from: number, ms: number): number[] {
  const last = Math.max(...s.map((x) => x.t));
  const n = Math.floor((last - from) / ms);
  const out = new Array<number>(Math.max(0, n)).fill(0);
  for (const x of s) {
    const i = Math.floor(((x.at ?? x.t) - from) / ms);
    if (x.status === 200 && i >= 0 && i < n) out[i]!++;
  }
  return out;
}

/** Requests per pod (200s naming the echo's pod). */
export function perPod(s: Sample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of s) if (x.pod) out[x.pod] = (out[x.pod] ?? 0) + 1;
  return out;
}

export async function clusterIP(ns: string, name: string): Promise<string> {
  return (await kjson<{ spec: { clusterIP: string } }>(['-n', ns, 'get', 'service', name])).spec.clusterIP;
}

/** The holder of the controller's Lease (its pod name is the identity's prefix), or undefined. */
export async function leaseHolder(ns = GW_NS): Promise<string | undefined> {
  const l = await kjson<{ spec: { holderIdentity?: string } }>(['-n', ns, 'get', 'lease', 'gw-controller']);
  return l.spec.holderIdentity || undefined;
}

/** The host PIDs in a container's memory cgroup (cgroup v1), undefined once the cgroup is gone. */
export function containerPids(pod: Pod, container: string): number[] | undefined {
  const id = pod.status.containerStatuses?.find((c) => c.name === container)?.containerID?.replace(/^\w+:\/\//, '');
  if (!id) return undefined;
  for (const qos of ['burstable', 'besteffort', '']) {
    try {
      const f = join('/sys/fs/cgroup/memory/kubepods', qos, `pod${pod.metadata.uid}`, id, 'cgroup.procs');
      return readFileSync(f, 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      // not this QoS class
    }
  }
  return undefined;
}

/** Resolves with the time (epoch ms) a container's processes are all gone, polling its cgroup every 20 ms. */
export async function exitTime(pod: Pod, container: string, secs: number): Promise<number> {
  const deadline = Date.now() + secs * 1000;
  while (Date.now() < deadline) {
    const pids = containerPids(pod, container);
    if (!pids || pids.length === 0) return Date.now();
    await sleep(20);
  }
  throw new Error(`${pod.metadata.name}/${container} still running after ${secs} s`);
}

/** `kubectl logs -f` of a container from now on, as lines; `stop()` ends it. */
export function followLogs(ns: string, pod: string, container: string): { lines: string[]; stop(): void } {
  const lines: string[] = [];
  const child = spawn(KUBECTL, ['-n', ns, 'logs', '-f', '--tail=0', pod, '-c', container], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let buf = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (c: string) => {
    buf += c;
    const parts = buf.split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
  });
  return { lines, stop: () => child.kill() };
}
