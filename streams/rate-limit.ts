/**
 * The local rate-limit resource of streams: at most `count` accesses per `interval`, shared by every
 * component that names the label inside one pipeline instance (one gateway process); never shared across
 * processes.
 *
 * Semantics (a sliding window, conservative about latency):
 * - an access occupies a slot from the moment it is granted until `interval` after it was *released*
 *   (the component releases its permit when the response has been read). So an external service sees at
 *   most `count` requests in any window of length `interval`, whatever the network latency does: the
 *   request granted `count` accesses later starts only after the earlier one ended plus a full interval.
 *   A permit released at once (release() right after acquire()) gives the plain sliding window.
 * - a caller over the limit WAITS for its turn: acquire() returns a promise resolved by a timer set for
 *   the moment the oldest slot frees (or by a release); no polling, no busy loop. Waiters are served in
 *   FIFO order and a newcomer never overtakes them.
 * - the waiting queue is bounded (`maxWaiting`, default 10 000): beyond it acquire() rejects at once
 *   with RateLimitQueueFullError. Inside a pipeline waiters are bounded by the components' concurrency
 *   (max_in_flight), so the bound is a safety net against a misbehaving caller.
 * - acquire(signal) leaves the queue when the signal aborts (pipeline stopping).
 */
import type { Clock } from '../lib/clock.js';
import { clearLongTimeout, setLongTimeout, type LongTimeout } from '../lib/long-timeout.js';
import { abortReason } from './duration.js';

/**
 * Wall clock with sub-millisecond resolution (performance.now() anchored at timeOrigin). Date.now()
 * truncates to whole ms, which would let a slot free up to 1 ms early against the peer's clock.
 */
export const preciseClock: Clock = { now: () => performance.timeOrigin + performance.now() };

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** Node's timers; an interval longer than 2^31−1 ms (24.8 days) is waited as a chain of timers. */
export const realTimers: Timers = {
  set: (fn, ms) => setLongTimeout(fn, ms),
  clear: (h) => clearLongTimeout(h as LongTimeout),
};

export interface Permit {
  /** How long the caller waited for this permit, in ms (0 when granted at once). */
  readonly waitedMs: number;
  /** Ends the access; its slot frees `interval` after this call. Idempotent. */
  release(): void;
}

export class RateLimitQueueFullError extends Error {
  override readonly name = 'RateLimitQueueFullError';
}

interface Waiter {
  enqueuedAt: number;
  resolve(p: Permit): void;
  reject(e: Error): void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

export interface LocalRateLimitOptions {
  count: number;
  intervalMs: number;
  clock?: Clock;
  timers?: Timers;
  maxWaiting?: number;
  label?: string;
}

export class LocalRateLimit {
  readonly label: string;
  private count: number;
  private intervalMs: number;
  private readonly clock: Clock;
  private readonly timers: Timers;
  private readonly maxWaiting: number;
  /** Release times of ended accesses still inside the window, oldest first. */
  private stamps: number[] = [];
  private inFlight = 0;
  private waiters: Waiter[] = [];
  private timer: unknown = undefined;
  private timerAt = 0;

  constructor(o: LocalRateLimitOptions) {
    this.label = o.label ?? '';
    this.check(o.count, o.intervalMs);
    this.count = o.count;
    this.intervalMs = o.intervalMs;
    this.clock = o.clock ?? preciseClock;
    this.timers = o.timers ?? realTimers;
    this.maxWaiting = o.maxWaiting ?? 10_000;
  }

  /** The schema refuses these first; this names the resource if a caller skipped it. */
  private check(count: number, intervalMs: number): void {
    if (!(count >= 1) || !(intervalMs > 0) || !Number.isFinite(intervalMs)) {
      throw new Error(
        `rate limit ${JSON.stringify(this.label)}: count must be ≥ 1 and interval > 0 (got count ${count}, interval ${intervalMs} ms)`,
      );
    }
  }

  get limit(): { count: number; intervalMs: number } {
    return { count: this.count, intervalMs: this.intervalMs };
  }

  /** Callers waiting for their turn. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Slots taken right now (in flight + ended inside the window). */
  used(): number {
    this.prune(this.clock.now());
    return this.inFlight + this.stamps.length;
  }

  /** New count/interval (hot reload); the history is kept, so a reload never opens a fresh window. */
  configure(count: number, intervalMs: number): void {
    this.check(count, intervalMs);
    this.count = count;
    this.intervalMs = intervalMs;
    this.pump();
  }

  /** A permit when a slot is free and nobody is waiting, else null (never waits). */
  tryAcquire(): Permit | null {
    if (this.waiters.length > 0 || this.used() >= this.count) return null;
    return this.grant(0);
  }

  acquire(signal?: AbortSignal): Promise<Permit> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const now = this.clock.now();
    const p = this.tryAcquire();
    if (p) return Promise.resolve(p);
    if (this.waiters.length >= this.maxWaiting) {
      return Promise.reject(
        new RateLimitQueueFullError(
          `rate limit ${this.label}: ${this.waiters.length} callers already waiting (bound ${this.maxWaiting})`,
        ),
      );
    }
    return new Promise<Permit>((resolve, reject) => {
      const w: Waiter = { enqueuedAt: now, resolve, reject, signal };
      if (signal) {
        w.onAbort = () => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(abortReason(signal));
          this.pump();
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.waiters.push(w);
      this.pump();
    });
  }

  /** Rejects every waiter (the pipeline is going away). */
  close(reason = new Error('rate limit closed')): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) {
      if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
      w.reject(reason);
    }
    this.clearTimer();
  }

  private grant(waitedMs: number): Permit {
    this.inFlight++;
    let done = false;
    return {
      waitedMs,
      release: () => {
        if (done) return;
        done = true;
        this.inFlight--;
        this.stamps.push(this.clock.now());
        this.pump();
      },
    };
  }

  private prune(now: number): void {
    let i = 0;
    while (i < this.stamps.length && this.stamps[i]! + this.intervalMs <= now) i++;
    if (i > 0) this.stamps.splice(0, i);
  }

  /** Serves waiters while slots are free, then arms one timer for the next slot to free. */
  private pump(): void {
    const now = this.clock.now();
    this.prune(now);
    while (this.waiters.length > 0 && this.inFlight + this.stamps.length < this.count) {
      const w = this.waiters.shift()!;
      if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve(this.grant(now - w.enqueuedAt));
    }
    if (this.waiters.length === 0) return this.clearTimer();
    // Full. With every slot in flight only a release can help (it calls pump); otherwise the oldest
    // ended access frees its slot at stamp + interval.
    const oldest = this.stamps[0];
    if (oldest === undefined) return this.clearTimer();
    const at = oldest + this.intervalMs;
    if (this.timer !== undefined && this.timerAt === at) return;
    this.clearTimer();
    this.timerAt = at;
    // A timer may fire a little early against the clock: pump() re-checks and re-arms.
    this.timer = this.timers.set(
      () => {
        this.timer = undefined;
        this.pump();
      },
      Math.max(1, at - now),
    );
  }

  private clearTimer(): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
  }
}
