/**
 * Spawns a long-running `gw <command>` (compiled CLI) and waits until its /readyz answers 200; a suite's
 * cluster stack of such processes (`gw controller`, `gw sidecar`s, `gw facade`) on the run's kube-apiserver
 * and Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { freePort } from '../harness/ports.js';
import { startController, type Controller } from '../integration/operator/helpers.js';
import { FACADE_CLIENT_SECRETS } from '../../facade/backend.js';
import { SECRET_LABEL } from '../../contract/annotations.js';
import { kubeconfig, kubectl } from './kube.js';
import { redisUrl } from './redis.js';
import { eventually, status } from './sidecar.js';
import { CLI, tempDir } from './standalone.js';

export interface ServerProcess {
  proc: ChildProcess;
  url: string;
  output: () => string;
  /** SIGTERM, SIGKILL after 8 s; resolves once the process has exited. */
  stop(): Promise<void>;
}

/** `gw <args>`, serving at `url`; ready when GET {healthUrl}/readyz answers 200 (within 20 s). */
export async function spawnServer(
  what: string,
  args: string[],
  url: string,
  healthUrl: string,
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GW_LOG_LEVEL: 'info', ...env },
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const p: ServerProcess = {
    proc,
    url,
    output: () => out,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 8000);
      await exited;
      clearTimeout(t);
    },
  };
  await eventually(
    async () => {
      if (proc.exitCode !== null) throw new Error(`${what} exited ${proc.exitCode}`);
      const r = await request(`${healthUrl}/readyz`);
      await r.body.dump();
      return r.statusCode === 200;
    },
    20_000,
    `${what} ready`,
  ).catch(async (e: Error) => {
    await p.stop();
    throw new Error(`${e.message}\n${out}`);
  });
  return p;
}

export type SidecarProcess = ServerProcess & { ops: string };

/** `gw sidecar` of `ns` on fresh loopback ports (the run's kube-apiserver and Redis); `ops`: its metrics listener. */
export async function spawnSidecar(ns: string, upstream: string): Promise<SidecarProcess> {
  const [gp, mp] = [await freePort(), await freePort()];
  const [gw, ops] = [`http://127.0.0.1:${gp}`, `http://127.0.0.1:${mp}`];
  const args = ['sidecar', '--upstream', upstream, '--kubeconfig', kubeconfig(), '--namespace', ns];
  args.push('--redis', redisUrl(), '--listen', `127.0.0.1:${gp}`, '--metrics-listen', `127.0.0.1:${mp}`);
  return Object.assign(await spawnServer('sidecar', args, gw, ops), { ops });
}

/** `gw controller`, `gw sidecar`s and `gw facade` of one namespace, as real processes. */
export interface ClusterStack {
  /** The controller; a suite that restarts it puts the new one here, so that `stop()` stops it. */
  ctl: Controller;
  sidecars: SidecarProcess[];
  facade: ServerProcess;
  /** Starts the facade again on its port with its arguments (after `facade.stop()`); it becomes `facade`. */
  restartFacade(): Promise<ServerProcess>;
  /** Stops the facade, the sidecars and the controller, and removes the facade's config file. */
  stop(): Promise<void>;
}

export interface ClusterStackOptions {
  ns: string;
  /** The sidecars' --upstream. */
  upstream: string;
  controllerArgs?: string[];
  /** Awaited once the controller runs, before the sidecars start (e.g. the resources Ready). */
  reconciled?: () => Promise<void>;
  /** How many sidecars (default 1). */
  sidecars?: number;
  /** A path every sidecar answers 401 on without credentials once it serves its compiled config (not 404). */
  serves: string;
  /** The facade's config file, given the sidecars' URLs. */
  facadeConfig: (sidecarUrls: string[]) => Record<string, unknown>;
  /** More arguments of `gw facade`. */
  facadeArgs?: string[];
}

/** The stack of `o.ns`: controller, then (once `o.reconciled`) the sidecars serving `o.serves`, then the facade. */
export async function startClusterStack(o: ClusterStackOptions): Promise<ClusterStack> {
  const dir = tempDir('gw-cluster-stack-');
  const st: Partial<ClusterStack> & Pick<ClusterStack, 'sidecars' | 'stop'> = {
    sidecars: [],
    async stop() {
      await st.facade?.stop();
      for (const s of st.sidecars) await s.stop();
      await st.ctl?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    st.ctl = await startController(o.ns, o.controllerArgs ?? []);
    await o.reconciled?.();
    const started = await Promise.allSettled(
      Array.from({ length: o.sidecars ?? 1 }, () => spawnSidecar(o.ns, o.upstream)),
    );
    for (const r of started) if (r.status === 'fulfilled') st.sidecars.push(r.value);
    for (const r of started) if (r.status === 'rejected') throw r.reason;
    for (const s of st.sidecars)
      await eventually(async () => (await status(`${s.url}${o.serves}`)) === 401, 20_000, `sidecar serves ${o.serves}`);
    // the Secret of client secrets, which the chart creates and the facade only replaces (docs/helm.md "RBAC")
    const sec = await kubectl(
      ['apply', '-n', o.ns, '-f', '-'],
      stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: { name: FACADE_CLIENT_SECRETS, labels: { [SECRET_LABEL]: 'true' } },
      }),
    );
    if (sec.code !== 0) throw new Error(`kubectl apply ${FACADE_CLIENT_SECRETS}: ${sec.stderr}`);
    const config = join(dir, 'facade.yaml');
    writeFileSync(config, stringify(o.facadeConfig(st.sidecars.map((s) => s.url))));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const args = ['facade', '--kubeconfig', kubeconfig(), '--namespace', o.ns, '--redis', redisUrl()];
    args.push('--config', config, '--listen', `127.0.0.1:${port}`, ...(o.facadeArgs ?? []));
    st.restartFacade = async () => (st.facade = await spawnServer('facade', args, url, url));
    await st.restartFacade();
  } catch (e) {
    await st.stop();
    throw e;
  }
  return st as ClusterStack;
}
