/**
 * The V8 flags of an injected sidecar, its heap limits derived from its container memory limit so the two
 * always agree (docs/helm.md, "Memory"): the young generation capped (the part of the heap that grows with
 * request concurrency), the old space at a share of the limit that leaves room for code, the young
 * generation and native buffers (V8 collects harder as it nears it instead of the kernel killing the
 * container), `--expose-gc` for the one GC after start-up (sidecar/heap-tuning.ts), and two V8 helper
 * threads (V8_POOL_SIZE). V8's memory reducer stays on: it hands the heap back once the load is over.
 * NODE_OPTIONS accepts all four flags.
 */

/**
 * V8 flags NODE_OPTIONS refuses, on node's command line in the image's ENTRYPOINT (and in `make bench`):
 * allocation-site pretenuring off, so per-request objects of undici and node:http die young instead of
 * being allocated straight into the old generation (docs/benchmarks.md, "Memory under load").
 */
export const ENTRYPOINT_NODE_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/** Cap of each of the young generation's two semi-spaces, MiB (docs/benchmarks.md, "Memory under load"). */
export const SIDECAR_SEMI_SPACE_MB = 8;
/**
 * V8's helper threads (background GC and compilation; node's default is 4). A sidecar has a fraction of a
 * core: four helpers at the event loop's priority take the cores from it while a burst of manifests is
 * parsed; with one, background marking falls behind under client rotation and the heap peaks over its
 * bound. Two keep both (docs/benchmarks.md, "Memory under load").
 */
export const V8_POOL_SIZE = 2;
/** The image's default NODE_OPTIONS (Dockerfile `ENV NODE_OPTIONS`): the heap flags without a memory limit. */
export const IMAGE_NODE_OPTIONS = `--expose-gc --max-semi-space-size=${SIDECAR_SEMI_SPACE_MB} --v8-pool-size=${V8_POOL_SIZE}`;
/** The old space's share of the container memory limit. */
export const OLD_SPACE_SHARE = 0.6;

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
