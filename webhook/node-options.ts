/**
 * The V8 flags of an injected sidecar, its heap limits derived from its container memory limit so the two
 * always agree (docs/helm.md, "Memory"; the values in lib/tuning.ts): the young generation capped (the part of the heap that grows with
 * request concurrency), the old space at a share of the limit that leaves room for code, the young
 * generation and native buffers (V8 collects harder as it nears it instead of the kernel killing the
 * container), `--expose-gc` for the one GC after start-up (sidecar/heap-tuning.ts), and two V8 helper
 * threads (V8_POOL_SIZE). V8's memory reducer stays on: it hands the heap back once the load is over.
 * NODE_OPTIONS accepts all four flags.
 */

import { OLD_SPACE_SHARE, SIDECAR_SEMI_SPACE_MB, V8_POOL_SIZE } from '../lib/tuning.js';

// the values and why each (lib/tuning.ts, process tuning in one place), for this file's readers
export {
  ENTRYPOINT_NODE_FLAGS,
  IMAGE_NODE_OPTIONS,
  OLD_SPACE_SHARE,
  SIDECAR_SEMI_SPACE_MB,
  V8_POOL_SIZE,
} from '../lib/tuning.js';

const UNITS: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

/** A Kubernetes memory quantity in MiB, or undefined when it is not one. */
export function quantityMiB(q: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(q.trim());
  if (!m) return undefined;
  return (Number(m[1]) * UNITS[m[2] ?? '']!) / 2 ** 20;
}

/** NODE_OPTIONS for a container with memory limit `limit`: young generation capped, old space at its share, two helper threads. */
export function heapNodeOptions(limit: string | undefined, semiSpaceMb = SIDECAR_SEMI_SPACE_MB): string {
  const flags = ['--expose-gc', `--max-semi-space-size=${semiSpaceMb}`, `--v8-pool-size=${V8_POOL_SIZE}`];
  const mib = limit === undefined ? undefined : quantityMiB(limit);
  if (mib !== undefined) flags.push(`--max-old-space-size=${Math.max(32, Math.floor(mib * OLD_SPACE_SHARE))}`);
  return flags.join(' ');
}
