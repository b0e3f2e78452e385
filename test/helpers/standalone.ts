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

/** `ipc`: with an IPC channel to the test process, as a Node parent's fork() would give it. */
export async function startStandalone(dir: string, extraArgs: string[] = [], env: Record<string, string> = {}, o: { ipc?: boolean } = {}): Promise<Standalone> {
  const gp = await freePort();
  const ap = await freePort();
  const proc = spawn(
    process.execPath,
    [CLI, 'standalone', '--resources', dir, '--listen', `127.0.0.1:${gp}`, '--admin-listen', `127.0.0.1:${ap}`, ...extraArgs],
    { env: { ...process.env, GW_SECRET: 'test-secret', GW_ACCESS_TOKENS: 'test-token', GW_LOG_LEVEL: 'warn', ...env }, stdio: o.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`standalone did not get ready:\n${out}`)), 15_000);
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
        if (proc.exitCode !== null) return r(proc.exitCode);
        proc.once('exit', (code) => r(code));
        proc.kill('SIGTERM');
      }),
  };
}

export function cleanup(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
