/**
 * One memory-reducing full GC when the gateway's start-up is done, before its listeners open (no request
 * waits on it; synchronous, tens of ms). Start-up (module loading, schema building, the first config)
 * grows the young generation to its maximum and leaves garbage an idle process would keep in its idle
 * RSS (docs/benchmarks.md, "Memory under load"). It runs only when node was started with
 * `--expose-gc` (the image's and the injected sidecar's NODE_OPTIONS, docs/helm.md); the V8 flags are
 * set where the process starts, never from here.
 */
import { STARTUP_GC_LARGE_HEAP_BYTES } from '../lib/tuning.js';

type GcOptions = { type: 'major'; execution: 'sync'; flavor?: 'last-resort' };

/** Returns whether the GC ran (only with `--expose-gc` on node's command line or in NODE_OPTIONS). */
export function releaseStartupMemory(heapUsed = process.memoryUsage().heapUsed): boolean {
  const gc = (globalThis as { gc?: (o: GcOptions) => void }).gc;
  if (typeof gc !== 'function') return false;
  gc(
    heapUsed > STARTUP_GC_LARGE_HEAP_BYTES
      ? { type: 'major', execution: 'sync' }
      : { type: 'major', execution: 'sync', flavor: 'last-resort' },
  );
  return true;
}
