/**
 * Allocation regression: heap bytes allocated per request proxied by a real `gw standalone` (key auth +
 * DRL, the `make bench` setup), measured by test/bench/alloc.ts (a GCProfiler count over 10,000
 * keep-alive requests after 10,000 of warm-up). Allocation does not depend on CPU load, so this holds on
 * a busy machine. Measured on Node 24 (docs/benchmarks.md, "Allocation per request"): ~15 KB, about what
 * the bare node:http + undici proxy allocates. The bound is the measured value plus ~10 %: it fails if the
 * request path grows by a couple of KB again (an async step, a logger call, an AbortController, a header
 * copy per request), not on run-to-run noise (±1 %).
 */
import { allocPerRequest } from '../bench/alloc.js';

const BOUND_BYTES = 16_800;

describe('gw bytes allocated per proxied request', () => {
  test(`≤ ${BOUND_BYTES} B (key auth + DRL)`, async () => {
    const [gw] = await allocPerRequest('gw', 10_000, 10_000);
    console.log(`gw allocation per request: ${gw!.bytesPerRequest} B (${gw!.scavenges} scavenges)`);
    expect(gw!.errors).toBe(0);
    expect(gw!.bytesPerRequest).toBeGreaterThan(1_000); // the probe counted something
    expect(gw!.bytesPerRequest).toBeLessThanOrEqual(BOUND_BYTES);
  }, 60_000);
});
