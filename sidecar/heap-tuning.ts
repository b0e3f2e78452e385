/**
 * One memory-reducing full GC when the gateway's start-up is done, before its listeners open (no request
 * waits on it; synchronous, tens of ms). Start-up (module loading, schema building, the first config)
 * grows the young generation to its maximum and leaves garbage an idle process would keep in its idle
 * RSS (docs/benchmarks.md, "Memory under load"). It runs only when node was started with
 * `--expose-gc` (the image's and the injected sidecar's NODE_OPTIONS, docs/helm.md); the V8 flags are
 * set where the process starts, never from here.
 */
type GcOptions = { type: 'major'; execution: 'sync'; flavor?: 'last-resort' };

/**
 * Above this much heap in use, one regular full GC instead of the last-resort one: that flavour repeats
 * the full GC until a pass frees nothing (at least two marks of the whole heap), which for a heap of
 * ~150 MB (gw standalone with 100,000 keys) would hold its ready line for more than a second, for almost
 * no more memory back than one pass gives.
 */
const LARGE_HEAP_BYTES = 64 * 1024 * 1024;

/** Returns whether the GC ran (only with `--expose-gc` on node's command line or in NODE_OPTIONS). */
export function releaseStartupMemory(heapUsed = process.memoryUsage().heapUsed): boolean {
  const gc = (globalThis as { gc?: (o: GcOptions) => void }).gc;
  if (typeof gc !== 'function') return false;
  gc(
    heapUsed > LARGE_HEAP_BYTES
      ? { type: 'major', execution: 'sync' }
      : { type: 'major', execution: 'sync', flavor: 'last-resort' },
  );
  return true;
}
