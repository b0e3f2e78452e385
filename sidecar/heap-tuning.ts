/**
 * V8 heap settings of the gateway processes (`gw sidecar`, `gw standalone`), each measured
 * (docs/benchmarks.md, runs H and I):
 * - Allocation-site pretenuring off. Under proxy load V8 decided that some of undici's and node:http's
 *   per-request allocation sites outlive a scavenge and allocated them straight into the old
 *   generation: ~4 MB of dead requests promoted per scavenge, a Mark-Compact every few seconds, and
 *   2–3 µs more CPU per request. Without it they die young like the bare proxy's.
 * - One memory-reducing full GC when start-up is done, before the listeners open. Start-up (module
 *   loading, schema building, the first config) grows the young generation to its maximum and leaves
 *   garbage an idle process would keep: idle RSS ~92 → ~77 MB (`gw standalone`, docs/benchmarks.md,
 *   run I). That GC would also arm V8's memory reducer, which then hands the heap back after every idle
 *   period, and the regrowth made the next seconds of traffic 20–60 % more expensive per request (why
 *   run H had dropped the GC). So the gateway runs with `--no-memory-reducer` (cli/gateway-v8-flags.ts):
 *   with both, no post-idle cost was measurable (run I).
 */
const { setFlagsFromString } = process.getBuiltinModule('node:v8');
const { runInNewContext } = process.getBuiltinModule('node:vm');

/**
 * The V8 flags the gateway needs on node's command line (they do nothing when set at run time);
 * cli/gateway-v8-flags.ts re-executes the process with them.
 */
export const GATEWAY_V8_FLAGS: readonly string[] = ['--no-memory-reducer'];

/** The GATEWAY_V8_FLAGS a command line lacks. */
export function missingV8Flags(execArgv: readonly string[]): string[] {
  return GATEWAY_V8_FLAGS.filter((f) => !execArgv.includes(f));
}

/** Call first thing in the process, before the request path runs. */
export function tuneHeapForProxying(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}

type GcOptions = { type: 'major'; execution: 'sync'; flavor: 'last-resort' };

/**
 * Call once start-up is done, before the listeners open (no request can wait on it). Synchronous,
 * ~50–90 ms. Only when the process runs with GATEWAY_V8_FLAGS (it could not re-execute: started with
 * an IPC channel, or no process.execve): with the memory reducer on, this GC would cost more than it
 * saves. Returns whether it ran.
 */
export function releaseStartupMemory(execArgv: readonly string[] = process.execArgv): boolean {
  if (missingV8Flags(execArgv).length) return false;
  // `gc` exists only in contexts created while --expose-gc is set
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (o: GcOptions) => void;
  setFlagsFromString('--no-expose-gc');
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return true;
}
