/**
 * `gw standalone` / `gw sidecar` re-execute themselves in place with their V8 flags
 * (cli/gateway-v8-flags.ts): same PID, flags on the command line, still serving; but not when started
 * with an IPC channel, which an exec would cut.
 */
import { readFileSync } from 'node:fs';
import { startStandalone, tempDir } from '../helpers/standalone.js';

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

  test('started with an IPC channel: no re-exec (it would cut the channel), the channel stays open', async () => {
    const s = await startStandalone(tempDir(), [], {}, { ipc: true });
    try {
      expect(cmdline(s.proc.pid!)).not.toContain('--no-memory-reducer');
      expect(s.proc.connected).toBe(true);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });
});
