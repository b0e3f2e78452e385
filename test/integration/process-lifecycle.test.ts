/**
 * docs/contract.md#processes, server processes whose API server or store is not there:
 * - SIGTERM ends `gw controller` also while it is still starting. It lost a SIGTERM that arrived before
 *   its caches synced (API server unreachable: it never stopped), and hung after one when Redis had never
 *   been reached (the subscriber's QUIT waited in the offline queue).
 * - `gw facade` with an API server it cannot reach is alive but not ready (it said ready and answered 500).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { freePort } from '../harness/ports.js';
import { kubeconfig } from '../helpers/kube.js';
import { CLI, cleanup, tempDir } from '../helpers/standalone.js';

/** Starts `gw controller`, waits for `ready` (a metrics-port probe), SIGTERMs it; exit code and time taken. */
async function termAfter(
  args: string[],
  ready: (metrics: string, out: string) => Promise<boolean>,
): Promise<{ code: number | null; ms: number; out: string }> {
  const port = await freePort();
  const metrics = `http://127.0.0.1:${port}`;
  const proc = spawn(process.execPath, [CLI, 'controller', '--metrics-listen', `127.0.0.1:${port}`, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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

let dir: string;
beforeAll(() => {
  dir = tempDir('gw-lifecycle-');
});
afterAll(() => cleanup(dir));

/** A kubeconfig whose API server does not exist (nothing listens on its port). */
async function deadKubeconfig(): Promise<string> {
  const dead = await freePort();
  const kc = join(dir, `dead-kubeconfig-${dead}.yaml`);
  writeFileSync(
    kc,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:${dead}', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
  );
  return kc;
}

describe('gw controller: SIGTERM while starting', () => {
  test('API server unreachable (caches never sync): SIGTERM exits 0 at once', async () => {
    const kc = await deadKubeconfig();
    // alive (healthz 200) but not ready: the informers keep retrying
    const r = await termAfter(
      ['--kubeconfig', kc],
      async (m) => (await status(`${m}/healthz`)) === 200 && (await status(`${m}/readyz`)) === 503,
    );
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(8000);
  });

  test('Redis never reachable: SIGTERM after start-up exits 0 at once (not when Redis comes)', async () => {
    const noRedis = await freePort();
    const r = await termAfter(
      ['--kubeconfig', kubeconfig(), '--namespace', 'default', '--redis', `redis://127.0.0.1:${noRedis}`],
      async (_m, out) => out.includes('gw controller ready'),
    );
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(8000);
  });
});

describe('gw facade: the API server is its store', () => {
  test('unreachable: alive (healthz 200) but not ready (readyz 503), with a line saying why; a reachable one: ready', async () => {
    for (const [kc, ready] of [
      [await deadKubeconfig(), 503],
      [kubeconfig(), 200],
    ] as const) {
      const port = await freePort();
      const proc = spawn(process.execPath, [CLI, 'facade', '--kubeconfig', kc, '--listen', `127.0.0.1:${port}`], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, GW_SECRET: 's', GW_ACCESS_TOKENS: 't' },
      });
      let out = '';
      proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
      try {
        const end = Date.now() + 20_000;
        while (!out.includes('gw facade ready')) {
          if (Date.now() > end || proc.exitCode !== null) throw new Error(`facade did not start:\n${out}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        expect(await status(`http://127.0.0.1:${port}/healthz`)).toBe(200);
        expect(await status(`http://127.0.0.1:${port}/readyz`)).toBe(ready);
        if (ready === 503) expect(out).toContain('API server unreachable: not ready');
      } finally {
        proc.kill('SIGKILL');
      }
    }
  });
});
