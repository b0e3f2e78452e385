/**
 * Puts the gateway's V8 flags (GATEWAY_V8_FLAGS, sidecar/heap-tuning.ts) on node's command line. gw.ts imports
 * this module first, so it runs before anything else loads: for `gw sidecar` and `gw standalone`
 * whose command line lacks them, it replaces the process (process.execve: same PID, same stdio, the
 * same arguments and environment) with one that has them, however gw was started (`gw`, `node
 * dist/cli/gw.js`, the image's entrypoint). NODE_OPTIONS refuses these flags. On a Node without
 * process.execve (Windows), or started with an IPC channel, the gateway runs on without them (and then
 * skips the start-up GC that needs them).
 *
 * Why each flag: sidecar/heap-tuning.ts.
 */
import { missingV8Flags } from '../sidecar/heap-tuning.js';

const GATEWAY_COMMANDS = new Set(['sidecar', 'standalone']);

/** The command line to re-execute with, or undefined when this process needs none. */
export function reexecArgs(argv: readonly string[], execArgv: readonly string[]): string[] | undefined {
  if (!GATEWAY_COMMANDS.has(argv[2] ?? '')) return undefined;
  const missing = missingV8Flags(execArgv);
  if (missing.length === 0) return undefined;
  return [argv[0]!, ...missing, ...execArgv, ...argv.slice(1)];
}

// Not with an IPC channel (a Node parent's fork()): it does not survive the exec.
const args = reexecArgs(process.argv, process.execArgv);
if (args && process.execve && !process.channel) process.execve(process.execPath, args, process.env);
