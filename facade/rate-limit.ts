/**
 * The facade's own rate limit, per client IP, on the project's own limiter: the sliding window log of
 * the gateway (limiters/sliding-log.ts, memory variant), so the management API has the same
 * semantics as a gateway limit with `enable_kv_rolling_limiter`: exact over the trailing window, and
 * spike arrest (refused requests enter the log too, so a client that keeps hammering stays refused
 * until it slows down). In memory, per facade process: the management API needs protection from
 * floods and credential guessing, not a cluster-wide allowance. Configured by `facade_rate_limit`.
 *
 * Clients are counted by address group (lib/ip/client-address.ts, `addressGroup`: an IPv6 /64, an IPv4 address), and wrong
 * credentials (guesses) also globally: once `rate` guesses per window have failed across every client,
 * a client whose own guess failed in the last window is refused before its credentials are compared, so
 * many addresses (120 loopback addresses, a botnet) together get no more than `rate` guesses per window.
 * Clients that have not guessed wrong are not held back by others' guessing.
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
    private readonly clock: Clock = systemClock,
  ) {
    // Smoothing off: a management API has no smoothing object, and no events are wanted.
    this.log = new MemorySlidingLog(clock, () => {}, false);
  }

  /** undefined when admitted, else whole seconds (≥ 1) until one more request would be admitted. */
  take(client: string): number | undefined {
    const r = this.log.check(`facade:${client}`, { rate: this.limit.rate, per: this.limit.per });
    if (!r.allowed) return r.retryAfter;
    return this.guessesLeft(client);
  }

  private windowStart = 0;
  private failures = 0;
  /** Client group → when its last guess failed (ms), bounded. */
  private readonly guessers = new Map<string, number>();

  /** A wrong credential from `client`. */
  failed(client: string): void {
    this.roll();
    this.failures++;
    if (this.guessers.size >= 100_000) this.guessers.clear();
    this.guessers.delete(client);
    this.guessers.set(client, this.clock.now());
  }

  /** undefined, or seconds to wait: the global guess budget is spent and this client has guessed wrong lately. */
  private guessesLeft(client: string): number | undefined {
    this.roll();
    if (this.failures < this.limit.rate) return undefined;
    const last = this.guessers.get(client);
    if (last === undefined || this.clock.now() - last >= this.limit.per * 1000) return undefined;
    return Math.max(1, Math.ceil((this.windowStart + this.limit.per * 1000 - this.clock.now()) / 1000));
  }

  private roll(): void {
    const now = this.clock.now();
    if (now - this.windowStart >= this.limit.per * 1000) {
      this.windowStart = now;
      this.failures = 0;
    }
  }
}
