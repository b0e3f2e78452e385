/**
 * The facade's own rate limit, per client IP, on the project's own limiter: the sliding window log of
 * the gateway (limiters/sliding-log.ts, memory variant), so the management API has the same
 * semantics as a gateway limit with `enable_kv_rolling_limiter`: exact over the trailing window, and
 * spike arrest (refused requests enter the log too, so a client that keeps hammering stays refused
 * until it slows down). In memory, per facade process: the management API needs protection from
 * floods and credential guessing, not a cluster-wide allowance. Configured by `facade_rate_limit`.
 */
import { systemClock, type Clock } from '../lib/clock.js';
import { MemorySlidingLog } from '../limiters/sliding-log.js';

export interface FacadeRateLimit {
  /** Requests admitted per window. */
  rate: number;
  /** Window in seconds. */
  per: number;
}

export const DEFAULT_FACADE_RATE_LIMIT: FacadeRateLimit = { rate: 100, per: 1 };

export class FacadeLimiter {
  private readonly log: MemorySlidingLog;

  constructor(
    private readonly limit: FacadeRateLimit,
    clock: Clock = systemClock,
  ) {
    // Smoothing off: a management API has no smoothing object, and no events are wanted.
    this.log = new MemorySlidingLog(clock, () => {}, false);
  }

  /** undefined when admitted, else whole seconds (≥ 1) until one more request would be admitted. */
  take(client: string): number | undefined {
    const r = this.log.check(`facade:${client}`, { rate: this.limit.rate, per: this.limit.per });
    return r.allowed ? undefined : r.retryAfter;
  }
}
