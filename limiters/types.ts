/** The one interface every limiter algorithm implements. */
import type { LimitSpec } from '../contract/config.js';

export interface LimitResult {
  allowed: boolean;
  /** The allowance in force (the rate, or the smoothed allowance). */
  limit: number;
  /** Requests left in the current window after this one. */
  remaining: number;
  /** Unix seconds when one more request will be admitted. */
  reset: number;
  /** Whole seconds to wait before retrying (≥ 1 when refused, 0 when allowed). */
  retryAfter: number;
  /**
   * Refused because the limit's store is unreachable (kv_failure_mode closed), not because the limit is
   * reached: the gateway answers 503, never a 429. Set only on such refusals.
   */
  unavailable?: true;
}

export interface SmoothingEvent {
  event: 'RateLimitSmoothingUp' | 'RateLimitSmoothingDown';
  limiterKey: string;
  oldAllowance: number;
  newAllowance: number;
  time: string;
}

/** Receives smoothing events and the new allowance (for a gauge). */
export type SmoothingListener = (e: SmoothingEvent, allowance: number) => void;

/** A value now (in-process limiters) or later (the store's): the request path stays synchronous when it can. */
export type MaybePromise<T> = T | Promise<T>;

export interface Limiter {
  readonly name: string;
  /**
   * In-process limiters answer synchronously; store-backed ones with a promise. `tentative`: the check of
   * a request that throttling may still retry (docs/contract.md#throttling): a limiter that logs refused requests (the
   * sliding log) counts it only when it is admitted; its final refusal is counted by an ordinary check.
   */
  check(bucket: string, limit: LimitSpec, tentative?: boolean): MaybePromise<LimitResult>;
  /** Forget a bucket (tests, key deletion). */
  reset?(bucket: string): Promise<void>;
  /**
   * Drop what this process keeps of a bucket; the store's state of it stays (and expires with its
   * window). The engine calls it for a per-client bucket (`limit_by`) evicted from its bounded LRU, so
   * an algorithm's in-process state stays within max_client_buckets buckets whatever the clients do.
   */
  forget(bucket: string): void;
}

export function result(allowed: boolean, limit: number, remaining: number, nowMs: number, nextMs: number): LimitResult {
  const wait = Math.max(0, nextMs - nowMs);
  return {
    allowed,
    limit,
    remaining: Math.max(0, Math.floor(remaining)),
    reset: Math.ceil(Math.max(nowMs, nextMs) / 1000),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil(wait / 1000)),
  };
}

/** Whole requests a rate allows (rates are counts; a fractional rate rounds down, 0 blocks all). */
export function allowanceOf(rate: number): number {
  return Math.max(0, Math.floor(rate));
}
