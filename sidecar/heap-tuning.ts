/**
 * V8 heap settings of the gateway processes (`gw sidecar`, `gw standalone`), each measured in
 * `make bench` (docs/benchmarks.md, run H):
 * - Allocation-site pretenuring off. Under proxy load V8 decided that some of undici's and node:http's
 *   per-request allocation sites outlive a scavenge and allocated them straight into the old
 *   generation: ~4 MB of dead requests promoted per scavenge, a Mark-Compact every few seconds, and
 *   2–3 µs more CPU per request. Without it they die young like the bare proxy's.
 * Tried and not kept: one memory-reducing full GC once the gateway is up (`gc({ type: 'major',
 * flavor: 'last-resort' })` through --expose-gc). It takes the idle RSS from ~104 to ~82 MB, but
 * after any idle period of ~40 s the gateway then ran ~15 % slower for minutes (docs/benchmarks.md,
 * run H), which costs users more than the 22 MB.
 */
import { setFlagsFromString } from 'node:v8';

/** Call first thing in the process, before the request path runs. */
export function tuneHeapForProxying(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}
