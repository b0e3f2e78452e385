/**
 * A process whose stdout reader has gone (`gw standalone | head`, a log collector that exited): it goes on
 * serving, and SIGTERM still ends it (lib/stdout-destination.ts, cli/gw.ts). pino's own destination retried
 * a write to the closed pipe for ever at exit, and the first direct write to stdout threw EPIPE.
 */
import { spawn } from 'node:child_process';
import { request } from 'undici';
import { CLI, cleanup, tempDir } from '../helpers/standalone.js';

test('gw standalone with its stdout closed: serves, logs, and exits 0 on SIGTERM', async () => {
  const dir = tempDir();
  const proc = spawn(
    process.execPath,
    [CLI, 'standalone', '--resources', dir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GW_LOG_LEVEL: 'info' } },
  );
  try {
    let err = '';
    proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
    // the first bytes of stdout, then its reader goes: every later write meets a closed pipe
    await new Promise((r) => proc.stdout.once('data', r));
    proc.stdout.destroy();
    const end = Date.now() + 20_000;
    let admin: string | undefined;
    while (admin === undefined && Date.now() < end) {
      // the listeners' addresses are on stdout, gone: read them from the process's sockets instead
      admin = await listeningOrigin(proc.pid!);
      if (admin === undefined) await new Promise((r) => setTimeout(r, 200));
    }
    expect(admin).toBeDefined();
    for (let i = 0; i < 20; i++) {
      const r = await request(`${admin}/healthz`).catch(() => undefined);
      await r?.body.dump();
    }
    expect(proc.exitCode).toBeNull(); // still up with its log lines going nowhere
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('hung'), 15_000))]);
    expect(code).toBe(0);
    expect(err).not.toMatch(/EPIPE|Unhandled/);
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    cleanup(dir);
  }
}, 40_000);

/** One listening TCP address of process `pid` (ss, iproute2), as an http:// origin. */
async function listeningOrigin(pid: number): Promise<string | undefined> {
  const { execFileSync } = process.getBuiltinModule('node:child_process');
  const out = execFileSync('ss', ['-Htlnp'], { encoding: 'utf8' });
  const ports = out
    .split('\n')
    .filter((l) => l.includes(`pid=${pid},`))
    .map((l) => /127\.0\.0\.1:(\d+)/.exec(l)?.[1])
    .filter((p): p is string => p !== undefined);
  return ports.length >= 2 ? `http://127.0.0.1:${ports[0]}` : undefined;
}
