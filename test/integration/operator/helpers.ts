/** Shared by the operator tests: a spawned `gw controller`, kubectl JSON helpers, polling with deadlines. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Redis } from 'ioredis';
import { request } from 'undici';
import { stringify } from 'yaml';
import { createKubeApi, resourcePath } from '../../../lib/kube/api.js';
import { loadKubeConnection } from '../../../lib/kube/connection.js';
import { REFS } from '../../../controller/context.js';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { freePort } from '../../harness/ports.js';
import { CLI } from '../../helpers/standalone.js';
import { freshNamespace, kubeconfig, kubectl } from '../../helpers/kube.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';

export interface Controller {
  proc: ChildProcess;
  metricsUrl: string;
  output: () => string;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** Peak resident set size in bytes (VmHWM), while the process runs. */
  peakRss(): number;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function eventually<T>(
  fn: () => Promise<T | undefined | false>,
  ms = 10_000,
  what = 'condition',
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(`${what} not met within ${ms} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startController(
  ns: string,
  extra: string[] = [],
  opts: { waitReady?: boolean; redis?: string; env?: Record<string, string> } = {},
): Promise<Controller> {
  const port = await freePort();
  const metricsUrl = `http://127.0.0.1:${port}`;
  const args = [
    CLI,
    'controller',
    '--kubeconfig',
    kubeconfig(),
    '--namespace',
    ns,
    '--redis',
    opts.redis ?? redisUrl(),
    '--metrics-listen',
    `127.0.0.1:${port}`,
    ...extra,
  ];
  const proc = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GW_LOG_LEVEL: process.env.GW_TEST_CONTROLLER_LOG ?? 'info', ...(opts.env ?? {}) },
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const c: Controller = {
    proc,
    metricsUrl,
    output: () => out,
    async metric(name, labels = {}) {
      const r = await request(`${metricsUrl}/metrics`);
      const text = await r.body.text();
      let sum = 0;
      for (const line of text.split('\n')) {
        if (!line.startsWith(name)) continue;
        const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
        if (!m || m[1] !== name) continue;
        const ls = m[2] ?? '';
        if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) sum += Number(m[3]);
      }
      return sum;
    },
    peakRss() {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'));
        return m ? Number(m[1]) * 1024 : 0;
      } catch {
        return 0;
      }
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 8000);
      await exited;
      clearTimeout(t);
    },
  };
  if (opts.waitReady !== false) {
    await eventually(
      async () => {
        if (proc.exitCode !== null) throw new Error(`controller exited: ${out}`);
        const r = await request(`${metricsUrl}/readyz`);
        await r.body.dump();
        return r.statusCode === 200;
      },
      20_000,
      'controller ready',
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${out}`);
    });
  }
  return c;
}

/** A suite's own kube namespace, Redis database, echo upstream and `gw controller` of that namespace. */
export interface ControllerStack {
  ns: string;
  redis: Redis;
  echo: { server: Server; url: string };
  ctl: Controller;
  /** Stops the controller (with `signal`), the echo upstream and the Redis connection. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Namespace `<prefix>-…`, a fresh Redis database, an echo upstream, then the controller (`args`, `opts`). */
export async function startControllerStack(
  prefix: string,
  args: string[] = [],
  opts: Parameters<typeof startController>[2] = {},
): Promise<ControllerStack> {
  const ns = await freshNamespace(prefix);
  const redis = await freshRedis();
  const echo = await startEcho();
  const st: ControllerStack = {
    ns,
    redis,
    echo,
    ctl: undefined as unknown as Controller,
    async stop(signal) {
      await st.ctl?.stop(signal);
      echo.server.close();
      redis.disconnect();
    },
  };
  try {
    st.ctl = await startController(ns, args, opts);
  } catch (e) {
    await st.stop();
    throw e;
  }
  return st;
}

/** `n` AccessKeys `k-<i>` of `ns` posted to the API server (32 at a time), spec `{key_hash: keyHash(i), ...spec}`. */
export async function createAccessKeys(
  ns: string,
  n: number,
  keyHash: (i: number) => string,
  spec: Record<string, unknown>,
): Promise<void> {
  const api = createKubeApi(await loadKubeConnection(kubeconfig()));
  const path = resourcePath(REFS.AccessKey, ns);
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      for (let i = next++; i < n; i = next++) {
        await api.post(path, {
          apiVersion: 'gw.io/v1alpha1',
          kind: 'AccessKey',
          metadata: { name: `k-${i}` },
          spec: { key_hash: keyHash(i), ...spec },
        });
      }
    }),
  );
}

/** How many sessions the Redis database holds (SCAN). */
export async function countSessions(redis: Redis): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', 'gw:session:*', 'COUNT', 5000);
    cursor = next;
    n += keys.length;
  } while (cursor !== '0');
  return n;
}

export async function apply(ns: string, ...docs: object[]): Promise<void> {
  const r = await kubectl(['apply', '-n', ns, '-f', '-'], docs.map((d) => stringify(d)).join('---\n'));
  if (r.code !== 0) throw new Error(`kubectl apply: ${r.stderr}`);
}

/** A Kubernetes Event, the fields the tests read. */
export interface KubeEvent {
  type: string;
  reason: string;
  message: string;
  involvedObject: { kind: string; name: string };
}

/** The Events of namespace `ns` about the object named `name` (any kind). */
export async function eventsOn(ns: string, name: string): Promise<KubeEvent[]> {
  const r = await kubectl(['get', 'events', '-n', ns, '--field-selector', `involvedObject.name=${name}`, '-o', 'json']);
  return (JSON.parse(r.stdout) as { items: KubeEvent[] }).items;
}

export async function getJson(ns: string, kind: string, name: string): Promise<Record<string, unknown> | undefined> {
  const r = await kubectl(['get', '-n', ns, kind, name, '-o', 'json']);
  if (r.code !== 0) {
    if (/NotFound/.test(r.stderr)) return undefined;
    throw new Error(r.stderr);
  }
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

export interface ReadyView {
  status?: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
  generation?: number;
  statusBody?: Record<string, unknown>;
}

export async function ready(ns: string, kind: string, name: string): Promise<ReadyView | undefined> {
  const o = (await getJson(ns, kind, name)) as
    | {
        metadata: { generation?: number };
        status?: {
          observedGeneration?: number;
          conditions?: { type: string; status: string; reason?: string; message?: string }[];
        };
      }
    | undefined;
  if (!o) return undefined;
  const c = o.status?.conditions?.find((x) => x.type === 'Ready');
  return {
    status: c?.status,
    reason: c?.reason,
    message: c?.message,
    observedGeneration: o.status?.observedGeneration,
    generation: o.metadata.generation,
    statusBody: o.status as Record<string, unknown>,
  };
}

/** Polls until Ready has the given status and reason, and observedGeneration caught up. */
export function waitReady(
  ns: string,
  kind: string,
  name: string,
  status: 'True' | 'False',
  reason: string,
  ms = 10_000,
): Promise<ReadyView> {
  return eventually(
    async () => {
      const r = await ready(ns, kind, name);
      return r && r.status === status && r.reason === reason && (r.observedGeneration ?? -1) >= (r.generation ?? 0)
        ? r
        : undefined;
    },
    ms,
    `${kind} ${ns}/${name} Ready=${status} ${reason}`,
  ).catch(async (e: Error) => {
    throw new Error(`${e.message}; last: ${JSON.stringify(await ready(ns, kind, name))}`);
  });
}

export const apiDef = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'ApiDefinition',
  metadata: { name },
  spec,
});
export const policy = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'Policy',
  metadata: { name },
  spec,
});
export const accessKey = (name: string, spec: Record<string, unknown>, annotations?: Record<string, string>) => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'AccessKey',
  metadata: { name, ...(annotations ? { annotations } : {}) },
  spec,
});
export const oauthClient = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'OAuthClient',
  metadata: { name },
  spec,
});
/** A Secret labelled gw.io/secret (the controller watches those: a change reaches it at once); `watched: false` omits the label. */
export const secret = (name: string, data: Record<string, string>, o: { watched?: boolean } = {}) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, ...(o.watched === false ? {} : { labels: { 'gw.io/secret': 'true' } }) },
  stringData: data,
});
