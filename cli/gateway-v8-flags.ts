/**
 * The V8 flags of the gateway processes that only take effect on node's command line. gw.ts imports
 * this module first, so it runs before anything else loads: for `gw sidecar` and `gw standalone`
 * whose command line lacks them, it replaces the process (process.execve: same PID, same stdio, the
 * same arguments and environment) with one that has them, however gw was started (`gw`, `node
 * dist/cli/gw.js`, the image's entrypoint). NODE_OPTIONS refuses these flags. On a Node without
 * process.execve (Windows), or started with an IPC channel, the gateway runs on without them.
 *
 * - `--no-memory-reducer`: the memory-reducing GC after start-up (sidecar/heap-tuning.ts) would arm
 *   V8's memory reducer, which then hands the heap back whenever the gateway has been idle a while;
 *   the heap's regrowth made the traffic after every idle period 20–60 % more expensive per request
 *   for several seconds (docs/benchmarks.md, run I). The reducer is created with the heap, so setting
 *   the flag at run time does nothing.
 */
export const GATEWAY_V8_FLAGS: readonly string[] = ['--no-memory-reducer'];

const GATEWAY_COMMANDS = new Set(['sidecar', 'standalone']);

/** The command line to re-execute with, or undefined when this process needs none. */
export function reexecArgs(argv: readonly string[], execArgv: readonly string[]): string[] | undefined {
  if (!GATEWAY_COMMANDS.has(argv[2] ?? '')) return undefined;
  const missing = GATEWAY_V8_FLAGS.filter((f) => !execArgv.includes(f));
  if (missing.length === 0) return undefined;
  return [argv[0]!, ...missing, ...execArgv, ...argv.slice(1)];
}

// Not with an IPC channel (a Node parent's fork()): it does not survive the exec.
const args = reexecArgs(process.argv, process.execArgv);
if (args && process.execve && !process.channel) process.execve(process.execPath, args, process.env);
