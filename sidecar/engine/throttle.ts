/**
 * Throttling (SPEC.md §3.6): a request refused by the key-level limit waits throttle_interval seconds
 * and is checked again, up to throttle_retry_limit times. Waiting is a timer (no worker held); the
 * number of requests waiting at once is bounded, and a request over the bound is refused at once.
 */
import type { MaybePromise } from '../limiters/types.js';

export type Sleep = (ms: number) => Promise<void>;
export const realSleep: Sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Throttle {
  private waiting = 0;
  constructor(
    private readonly maxWaiting: number,
    private readonly sleep: Sleep = realSleep,
  ) {}

  get inFlight(): number {
    return this.waiting;
  }

  /** Re-runs `check` after each interval until it passes or the retries are used up. */
  async retry<T extends { allowed: boolean }>(first: T, intervalS: number, retries: number, check: () => MaybePromise<T>): Promise<T> {
    let r = first;
    for (let i = 0; i < retries && !r.allowed; i++) {
      if (this.waiting >= this.maxWaiting) return r;
      this.waiting++;
      try {
        await this.sleep(Math.max(0, intervalS) * 1000);
      } finally {
        this.waiting--;
      }
      r = await check();
    }
    return r;
  }
}
