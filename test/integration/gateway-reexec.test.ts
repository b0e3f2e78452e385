/**
 * `gw standalone` / `gw sidecar` re-execute themselves in place with their V8 flags
 * (cli/gateway-v8-flags.ts): same PID, flags on the command line, still serving; but not when started
 * with an IPC channel, which an exec would cut.
 */
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { freePort } from '../harness/ports.js';
import { CLI, startStandalone, tempDir } from '../helpers/standalone.js';

const cmdline = (pid: number): string[] => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

describe('gateway re-exec with its V8 flags', () => {
  test('spawned plainly: the same process now runs with --no-memory-reducer and serves', async () => {
    const s = await startStandalone(tempDir());
    try {
      expect(cmdline(s.proc.pid!)).toContain('--no-memory-reducer');
      expect((await fetch(`${s.admin}/readyz`)).status).toBe(200);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });

  test('forked with an IPC channel: no re-exec, the channel stays open', async () => {
    const c = fork(CLI, ['standalone', '--resources', tempDir(), '--listen', `127.0.0.1:${await freePort()}`, '--admin-listen', `127.0.0.1:${await freePort()}`], {
      env: { ...process.env, GW_SECRET: 's', GW_ACCESS_TOKENS: 't', GW_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let out = '';
    c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    try {
      for (let i = 0; i < 150 && !out.includes('gw standalone ready:'); i++) await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain('gw standalone ready:');
      expect(cmdline(c.pid!)).not.toContain('--no-memory-reducer');
      expect(c.connected).toBe(true);
    } finally {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }
  }, 30_000);
});
