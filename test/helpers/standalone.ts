/** Spawns the real `gw standalone` (compiled CLI) on free loopback ports and waits for its ready line. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../harness/ports.js';

export interface Standalone {
  proc: ChildProcess;
  gateway: string;
  admin: string;
  dir: string;
  output: () => string;
  stop(): Promise<number | null>;
}

export const CLI = resolve('dist/cli/gw.js');

export function tempDir(prefix = 'gw-res-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * The command prefix that makes file permissions apply to the gateway: as root (CI, containers) it drops
 * the capabilities that bypass them (setpriv, util-linux), so a mode-000 file is unreadable as for any user.
 */
export function permissionsApply(): string[] {
  return process.getuid?.() === 0 ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--'] : [];
}

/**
 * `ipc`: with an IPC channel to the test process, as a Node parent's fork() would give it.
 * `permissions`: file permissions apply to the gateway even when the tests run as root.
 */
export interface StartOptions {
  ipc?: boolean;
  permissions?: boolean;
  readyTimeoutMs?: number;
  /** node's own flags, before the CLI (`--cpu-prof`, flags NODE_OPTIONS refuses). */
  nodeArgs?: readonly string[];
}

export async function startStandalone(
  dir: string,
  extraArgs: string[] = [],
  env: Record<string, string> = {},
  o: StartOptions = {},
): Promise<Standalone> {
  // a port free when picked can be taken by another worker's process before gw listens: new ports, once more
  try {
    return await startOnPorts(dir, extraArgs, env, o);
  } catch (e) {
    if (!(e as Error).message.includes('EADDRINUSE')) throw e;
    return startOnPorts(dir, extraArgs, env, o);
  }
}

async function startOnPorts(
  dir: string,
  extraArgs: string[],
  env: Record<string, string>,
  o: StartOptions,
): Promise<Standalone> {
  const gp = await freePort();
  const ap = await freePort();
  const [cmd, ...prefix] = [...(o.permissions ? permissionsApply() : []), process.execPath];
  const proc = spawn(
    cmd!,
    [
      ...prefix,
      ...(o.nodeArgs ?? []),
      CLI,
      'standalone',
      '--resources',
      dir,
      '--listen',
      `127.0.0.1:${gp}`,
      '--admin-listen',
      `127.0.0.1:${ap}`,
      ...extraArgs,
    ],
    {
      env: { ...process.env, GW_SECRET: 'test-secret', GW_ACCESS_TOKENS: 'test-token', GW_LOG_LEVEL: 'warn', ...env },
      stdio: o.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`standalone did not get ready:\n${out}`)), o.readyTimeoutMs ?? 15_000);
    const check = (): void => {
      if (out.includes('gw standalone ready:')) {
        clearTimeout(t);
        res();
      }
    };
    proc.stdout!.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(t);
      rej(new Error(`standalone exited with ${code}:\n${out}`));
    });
  });
  return {
    proc,
    gateway: `http://127.0.0.1:${gp}`,
    admin: `http://127.0.0.1:${ap}`,
    dir,
    output: () => out,
    stop: () =>
      new Promise((r) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return r(proc.exitCode);
        proc.once('exit', (code) => r(code));
        proc.kill('SIGTERM');
      }),
  };
}

export function cleanup(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** An ApiDefinition manifest named `name`; `spec`: its spec's YAML lines, unindented. */
export function apiManifest(name: string, spec: string): string {
  const body = spec
    .trim()
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
  return `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec:\n${body}\n`;
}
