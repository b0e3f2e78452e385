/**
 * `gw standalone` / `gw sidecar` re-execute themselves in place with their V8 flags
 * (cli/gateway-v8-flags.ts): same PID, flags on the command line, still serving; but not when started
 * with an IPC channel, which an exec would cut.
 */
import { cmdline } from '../bench/proc.js';
import { cleanup, startStandalone, tempDir } from '../helpers/standalone.js';

describe('gateway re-exec with its V8 flags', () => {
  test('spawned plainly: the same process now runs with --no-memory-reducer and serves', async () => {
    const dir = tempDir();
    const s = await startStandalone(dir);
    try {
      expect(cmdline(s.proc.pid!)).toContain('--no-memory-reducer');
      expect((await fetch(`${s.admin}/readyz`)).status).toBe(200);
    } finally {
      expect(await s.stop()).toBe(0);
      cleanup(dir);
    }
  });

  test('started with an IPC channel: no re-exec (it would cut the channel), the channel stays open', async () => {
    const dir = tempDir();
    const s = await startStandalone(dir, [], {}, { ipc: true });
    try {
      expect(cmdline(s.proc.pid!)).not.toContain('--no-memory-reducer');
      expect(s.proc.connected).toBe(true);
    } finally {
      expect(await s.stop()).toBe(0);
      cleanup(dir);
    }
  });
});
