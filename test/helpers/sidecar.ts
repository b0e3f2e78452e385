/** Spawns the real `gw sidecar` (compiled CLI) against the run's kube-apiserver and waits for /readyz. */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { ApiDefinitionResource } from '../../crds/kinds.js';
import { compileConfig } from '../../compiler/compile-config.js';
import { freePort } from '../harness/ports.js';
import { kubeconfig, kubectl } from './kube.js';
import { CLI, tempDir } from './standalone.js';

export interface Sidecar {
  proc: ChildProcess;
  gw: string;
  ops: string;
  out(): string;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export async function status(url: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(url, { headers });
  await r.body.dump();
  return r.statusCode;
}

export async function eventually(fn: () => Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn().catch(() => false))) {
    if (Date.now() > end) throw new Error(`${what} not met in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * `gw sidecar` for `upstream` in `ns` on loopback ports, with `args` added, that must not start: resolves
 * once it exits, with its exit code and everything it wrote.
 */
export async function refusedSidecar(
  upstream: string,
  ns: string,
  args: string[],
): Promise<{ code: number | null; out: string }> {
  const proc = spawn(
    process.execPath,
    [
      CLI,
      'sidecar',
      '--upstream',
      upstream,
      '--listen',
      '127.0.0.1:0',
      '--metrics-listen',
      '127.0.0.1:0',
      '--kubeconfig',
      kubeconfig(),
      '--namespace',
      ns,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  return { code, out };
}

export async function metricsText(s: Sidecar): Promise<string> {
  const r = await request(`${s.ops}/metrics`);
  return r.body.text();
}

/** Compiled config of keyless APIs: [listen path, rate, per][]. */
export function configOf(
  ns: string,
  apis: { name: string; path: string; rate: number; per: number; keyless?: boolean }[],
): string {
  const defs = apis.map((a) =>
    ApiDefinitionResource.parse({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'ApiDefinition',
      metadata: { name: a.name, namespace: ns },
      spec: {
        use_keyless: a.keyless ?? true,
        proxy: { listen_path: a.path },
        global_rate_limit: { rate: a.rate, per: a.per },
      },
    }),
  );
  return JSON.stringify(compileConfig(defs, []).config);
}

export async function writeConfigMap(ns: string, text: string): Promise<void> {
  const cm = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'gw-config', namespace: ns },
    data: { 'config.json': text },
  };
  const r = await kubectl(['apply', '-f', '-'], stringify(cm));
  if (r.code !== 0) throw new Error(r.stderr);
}

export async function startSidecar(
  o: {
    ns: string;
    upstream: string;
    redis?: string;
    group?: string;
    options?: string;
    /** An existing --config file (instead of `options` written to a new one). */
    configFile?: string;
    kubeconfig?: string;
    /** Extra environment for the process (e.g. NODE_OPTIONS). */
    env?: Record<string, string>;
    /** The compiled CLI to run (default: this tree's dist/cli/gw.js). */
    cli?: string;
    /** What to wait for before returning (default /readyz; /healthz when no config is there yet). */
    waitFor?: '/readyz' | '/healthz';
    /** More flags of `gw sidecar`. */
    args?: string[];
  },
  retried = false,
): Promise<Sidecar> {
  const [gp, mp] = [await freePort(), await freePort()];
  const args = [
    o.cli ?? CLI,
    'sidecar',
    '--upstream',
    o.upstream,
    '--kubeconfig',
    o.kubeconfig ?? kubeconfig(),
    '--namespace',
    o.ns,
    '--listen',
    `127.0.0.1:${gp}`,
    '--metrics-listen',
    `127.0.0.1:${mp}`,
  ];
  if (o.redis) args.push('--redis', o.redis);
  if (o.group) args.push('--group', o.group);
  if (o.options) {
    const f = join(tempDir('gw-sidecar-cfg-'), 'config.yaml');
    writeFileSync(f, o.options);
    args.push('--config', f);
  }
  if (o.configFile) args.push('--config', o.configFile);
  if (o.args) args.push(...o.args);
  const proc = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GW_LOG_LEVEL: 'info', ...o.env },
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const s: Sidecar = {
    proc,
    gw: `http://127.0.0.1:${gp}`,
    ops: `http://127.0.0.1:${mp}`,
    out: () => out,
    stop: () =>
      new Promise((r) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return r(proc.exitCode);
        proc.once('exit', (code) => r(code));
        proc.kill('SIGTERM');
      }),
  };
  const path = o.waitFor ?? '/readyz';
  const exited = new Promise<void>((_, reject) => proc.once('exit', () => reject(new Error('sidecar exited'))));
  exited.catch(() => undefined);
  try {
    await Promise.race([
      eventually(
        async () => (await status(`${s.ops}${path}`)) === 200,
        20_000,
        `sidecar ${path === '/readyz' ? 'ready' : 'alive'}`,
      ),
      exited,
    ]);
  } catch (e) {
    proc.kill('SIGKILL');
    // a port freePort gave was taken by another process before the sidecar listened: new ports, once
    if (!retried && out.includes('EADDRINUSE')) return startSidecar(o, true);
    throw new Error(`${(e as Error).message}\n${out}`, { cause: e });
  }
  return s;
}
