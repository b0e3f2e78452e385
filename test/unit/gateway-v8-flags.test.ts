import { reexecArgs } from '../../cli/gateway-v8-flags.js';
import { GATEWAY_V8_FLAGS, releaseStartupMemory } from '../../sidecar/heap-tuning.js';

const NODE = '/usr/bin/node';
const GW = '/app/dist/cli/gw.js';

describe('gateway V8 flags (re-exec of gw sidecar / gw standalone)', () => {
  test('the flags are the memory reducer off', () => {
    expect(GATEWAY_V8_FLAGS).toEqual(['--no-memory-reducer']);
  });

  test('sidecar and standalone re-execute with the flags first, keeping node options and every argument', () => {
    expect(reexecArgs([NODE, GW, 'sidecar', '--upstream', 'http://127.0.0.1:8080'], [])).toEqual([
      NODE,
      '--no-memory-reducer',
      GW,
      'sidecar',
      '--upstream',
      'http://127.0.0.1:8080',
    ]);
    expect(reexecArgs([NODE, GW, 'standalone', '--resources', 'd'], ['--enable-source-maps'])).toEqual([
      NODE,
      '--no-memory-reducer',
      '--enable-source-maps',
      GW,
      'standalone',
      '--resources',
      'd',
    ]);
  });

  test('no re-exec once the flags are there (no loop), nor for the other commands', () => {
    expect(reexecArgs([NODE, GW, 'sidecar'], ['--no-memory-reducer'])).toBeUndefined();
    for (const sub of ['controller', 'facade', 'webhook', 'keys', '--help', undefined]) {
      expect(reexecArgs(sub === undefined ? [NODE, GW] : [NODE, GW, sub], [])).toBeUndefined();
    }
  });

  test('the start-up GC runs only with the flags on the command line (else it would arm the memory reducer)', () => {
    expect(releaseStartupMemory([])).toBe(false);
    expect(releaseStartupMemory(['--enable-source-maps'])).toBe(false);
    expect(releaseStartupMemory(['--no-memory-reducer'])).toBe(true);
  });
});
