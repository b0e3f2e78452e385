/**
 * The facade's own rate limit, per client IP: an exact sliding window over admitted requests (a ring
 * of the last `rate` admission times per client). In memory, per facade process: the management API
 * needs protection from floods and credential guessing, not a cluster-wide allowance.
 */
export interface FacadeRateLimit {
  /** Requests admitted per window. */
  rate: number;
  /** Window in seconds. */
  per: number;
}

export const DEFAULT_FACADE_RATE_LIMIT: FacadeRateLimit = { rate: 100, per: 1 };

interface Ring {
  times: number[];
  next: number;
  last: number;
}

export class SlidingWindowLimiter {
  private readonly rings = new Map<string, Ring>();
  private readonly windowMs: number;
  private lastSweep = 0;

  constructor(
    private readonly limit: FacadeRateLimit,
    private readonly now: () => number = Date.now,
  ) {
    this.windowMs = limit.per * 1000;
  }

  /** undefined when admitted, else seconds until one more request would be admitted. */
  take(client: string): number | undefined {
    const t = this.now();
    this.sweep(t);
    let ring = this.rings.get(client);
    if (!ring) {
      ring = { times: [], next: 0, last: t };
      this.rings.set(client, ring);
    }
    ring.last = t;
    if (ring.times.length < this.limit.rate) {
      ring.times.push(t);
      return undefined;
    }
    const oldest = ring.times[ring.next]!;
    if (t - oldest < this.windowMs) return (oldest + this.windowMs - t) / 1000;
    ring.times[ring.next] = t;
    ring.next = (ring.next + 1) % this.limit.rate;
    return undefined;
  }

  /** Forget clients idle for a whole window (bounded memory). */
  private sweep(t: number): void {
    if (t - this.lastSweep < Math.max(this.windowMs, 1000)) return;
    this.lastSweep = t;
    for (const [k, r] of this.rings) if (t - r.last >= this.windowMs) this.rings.delete(k);
  }
}
