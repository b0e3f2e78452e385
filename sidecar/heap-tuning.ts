/**
 * V8 heap settings of the gateway processes (`gw sidecar`, `gw standalone`), each measured in
 * `make bench` (docs/benchmarks.md, "heap tuning"):
 * - Allocation-site pretenuring off. Under proxy load V8 decided that some of undici's and node:http's
 *   per-request allocation sites outlive a scavenge and allocated them straight into the old
 *   generation: ~4 MB of dead requests promoted per scavenge, a Mark-Compact every few seconds, and
 *   2–3 µs more CPU per request. Without it they die young like the bare proxy's.
 * - One memory-reducing full GC once the gateway is up: start-up (module loading, schema building,
 *   the first config) grows the young generation to its maximum and leaves garbage that an idle
 *   process never collects. Releasing it takes the idle RSS from ~110 MB to ~85 MB; the young
 *   generation grows again when traffic needs it.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Call first thing in the process, before the request path runs. */
export function tuneHeapForProxying(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}

type GcOptions = { type: 'major'; execution: 'sync'; flavor: 'last-resort' };

/** Call once start-up is done (the listeners are up). Synchronous: a few ms. */
export function releaseStartupMemory(): void {
  // `gc` exists only in contexts created after --expose-gc is set
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (o: GcOptions) => void;
  setFlagsFromString('--no-expose-gc');
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
