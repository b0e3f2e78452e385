/** Spawns a long-running `gw <command>` (compiled CLI) and waits until its /readyz answers 200. */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'undici';
import { eventually } from './sidecar.js';
import { CLI } from './standalone.js';

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
