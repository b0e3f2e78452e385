/**
 * kv_failure_mode around a store-backed limiter: when the store is disconnected, errors or misses its
 * deadline (kv_deadline_ms, default 1 s), `open` admits (and reports the error), `closed` refuses with
 * Retry-After 1 and marks the refusal `unavailable` (the gateway answers 503, not a 429).
 * The request path never sees the exception.
 */
import type { Clock } from '../lib/clock.js';
import { DEFAULT_STORE_DEADLINE_MS, isWrongType, StoreCalls } from '../lib/store/store-calls.js';
import type { LimitSpec } from '../contract/config.js';
import { allowanceOf, result, type Limiter, type LimitResult, type MaybePromise } from './types.js';

export type FailureMode = 'open' | 'closed';

export class WithFailureMode implements Limiter {
  readonly name: string;
  constructor(
    private readonly inner: Limiter,
    private readonly mode: FailureMode,
    private readonly clock: Clock,
    private readonly calls = new StoreCalls(DEFAULT_STORE_DEADLINE_MS),
    private readonly onRepair: (bucket: string) => void = () => {},
  ) {
    this.name = inner.name;
  }

  check(bucket: string, limit: LimitSpec, tentative?: boolean): MaybePromise<LimitResult> {
    return this.calls.guard(
      () => this.inner.check(bucket, limit, tentative),
      (e) => {
        if (isWrongType(e)) this.repair(bucket);
        return this.failed(limit);
      },
    );
  }

  /** A bucket's keys hold something of another type (bad store content): removed, so the next check starts it afresh. */
  private repair(bucket: string): void {
    this.onRepair(bucket);
    void this.inner.reset?.(bucket).catch(() => undefined);
  }

  /** The decision of kv_failure_mode for a limit whose store call failed. */
  private failed(limit: LimitSpec): LimitResult {
    const now = this.clock.now();
    const allowance = allowanceOf(limit.rate);
    return this.mode === 'open'
      ? result(true, allowance, allowance, now, now)
      : { ...result(false, allowance, 0, now, now + 1000), unavailable: true };
  }

  forget(bucket: string): void {
    this.inner.forget(bucket);
  }

  async reset(bucket: string): Promise<void> {
    await this.calls.guard(
      () => this.inner.reset?.(bucket),
      () => undefined,
    );
  }
}
