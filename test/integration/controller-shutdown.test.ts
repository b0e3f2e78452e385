/**
 * SPEC.md §1: SIGTERM ends a server process gracefully — also while it is still starting. `gw controller`
 * lost a SIGTERM that arrived before its caches synced (API server unreachable: it never stopped), and
 * hung after one when Redis had never been reached (the subscriber's QUIT waited in the offline queue).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { freePort } from '../harness/ports.js';
import { kubeconfig } from '../helpers/kube.js';
import { CLI, cleanup, tempDir } from '../helpers/standalone.js';

/** Starts `gw controller`, waits for `ready` (a metrics-port probe), SIGTERMs it; exit code and time taken. */
async function termAfter(args: string[], ready: (metrics: string, out: string) => Promise<boolean>): Promise<{ code: number | null; ms: number; out: string }> {
  const port = await freePort();
  const metrics = `http://127.0.0.1:${port}`;
  const proc = spawn(process.execPath, [CLI, 'controller', '--metrics-listen', `127.0.0.1:${port}`, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  const deadline = Date.now() + 20_000;
  while (!(await ready(metrics, out).catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`controller never reached the state to test:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const t0 = Date.now();
  proc.kill('SIGTERM');
  const killer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(killer);
  return { code, ms: Date.now() - t0, out };
}

const status = async (url: string): Promise<number> => {
  const r = await request(url);
  await r.body.dump();
  return r.statusCode;
};

describe('gw controller: SIGTERM while starting', () => {
  let dir: string;
  beforeAll(() => {
    dir = tempDir('gw-ctl-stop-');
  });
  afterAll(() => cleanup(dir));

  test('API server unreachable (caches never sync): SIGTERM exits 0 at once', async () => {
    const dead = await freePort(); // nothing listens there
    const kc = join(dir, 'dead-kubeconfig.yaml');
    writeFileSync(
      kc,
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:${dead}', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
    );
    // alive (healthz 200) but not ready: the informers keep retrying
    const r = await termAfter(['--kubeconfig', kc], async (m) => (await status(`${m}/healthz`)) === 200 && (await status(`${m}/readyz`)) === 503);
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(8000);
    expect(r.out).toContain('shutting down');
  });

  test('Redis never reachable: SIGTERM after start-up exits 0 at once (not when Redis comes)', async () => {
    const noRedis = await freePort();
    const r = await termAfter(['--kubeconfig', kubeconfig(), '--namespace', 'default', '--redis', `redis://127.0.0.1:${noRedis}`], async (_m, out) => out.includes('gw controller ready'));
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(8000);
  });
});
