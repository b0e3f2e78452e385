/**
 * kv_failure_mode around a store-backed limiter: when the store errors, `open` admits (and reports
 * the error), `closed` refuses with Retry-After 1.
 */
import type { Clock } from '../../lib/clock.js';
import type { LimitSpec } from '../config/types.js';
import { allowanceOf, result, type Limiter, type LimitResult } from './types.js';

export type FailureMode = 'open' | 'closed';

export const asError = (e: unknown): Error => (e instanceof Error ? e : new Error(String(e)));

export class WithFailureMode implements Limiter {
  readonly name: string;
  constructor(
    private readonly inner: Limiter,
    private readonly mode: FailureMode,
    private readonly clock: Clock,
    private readonly onError: (e: Error) => void,
  ) {
    this.name = inner.name;
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    try {
      return await this.inner.check(bucket, limit);
    } catch (e) {
      this.onError(asError(e));
      const now = this.clock.now();
      const allowance = allowanceOf(limit.rate);
      return this.mode === 'open' ? result(true, allowance, allowance, now, now) : result(false, allowance, 0, now, now + 1000);
    }
  }

  async reset(bucket: string): Promise<void> {
    try {
      await this.inner.reset?.(bucket);
    } catch (e) {
      this.onError(asError(e));
    }
  }
}
