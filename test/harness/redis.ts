/** A real redis-server (Debian package) on a free loopback port, one per test run. */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { freePort } from './ports.js';

export interface RedisHandle {
  url: string;
  port: number;
  version: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('error', () => resolve(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
  });
}

export async function startRedis(port?: number): Promise<RedisHandle> {
  const bin = process.env.GW_REDIS_SERVER ?? 'redis-server';
  let version: string;
  try {
    version = execFileSync(bin, ['--version']).toString().trim();
  } catch {
    throw new Error('redis-server not found: install the Debian package (make test-servers)');
  }
  const p = port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'gw-redis-'));
  const proc = spawn(
    bin,
    ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--databases', '32'],
    {
      stdio: 'ignore',
    },
  );
  const deadline = Date.now() + 10_000;
  while (!(await ping(p))) {
    if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${p}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `redis://127.0.0.1:${p}`,
    port: p,
    version,
    proc,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
