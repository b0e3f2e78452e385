/**
 * Fixed window (`enable_fixed_window_rate_limiter`): one counter per epoch-aligned window
 * (n = floor(now / per)), expiring with it. Once `rate` is reached, requests are refused until the
 * window ends, then the counter restarts. Constant store use (INCR + PEXPIRE in one MULTI); no smoothing.
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import type { StoreClient } from '../lib/store/redis.js';
import { storeKeys } from '../contract/store-keys.js';
import type { LimitSpec } from '../contract/config.js';
import { allowanceOf, result, type Limiter, type LimitResult } from './types.js';

export function fixedWindow(now: number, per: number): { id: number; end: number } {
  const ms = Math.max(1, Math.round(per * 1000));
  const id = Math.floor(now / ms);
  return { id, end: (id + 1) * ms };
}

function verdict(count: number, limit: LimitSpec, now: number, end: number): LimitResult {
  const allowance = allowanceOf(limit.rate);
  const allowed = count <= allowance;
  return result(allowed, allowance, allowance - count, now, allowed && count < allowance ? now : end);
}

export class MemoryFixedWindow implements Limiter {
  readonly name = 'fixed_window';
  private readonly counters: ExpiringMap<{ id: number; count: number }>;
  constructor(private readonly clock: Clock) {
    this.counters = new ExpiringMap(clock);
  }

  check(bucket: string, limit: LimitSpec): LimitResult {
    const now = this.clock.now();
    const w = fixedWindow(now, limit.per);
    let c = this.counters.get(bucket, now);
    if (!c || c.id !== w.id) this.counters.set(bucket, (c = { id: w.id, count: 0 }), w.end);
    c.count++;
    return verdict(c.count, limit, now, w.end);
  }

  async reset(bucket: string): Promise<void> {
    this.counters.delete(bucket);
  }

  forget(bucket: string): void {
    this.counters.delete(bucket);
  }
}

export class RedisFixedWindow implements Limiter {
  readonly name = 'fixed_window';
  constructor(
    private readonly redis: StoreClient,
    private readonly clock: Clock,
  ) {}

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const w = fixedWindow(now, limit.per);
    const key = storeKeys.fixedWindow(bucket, w.id);
    // relative TTL (the clock may be a test's): the counter outlives its window by a second
    const res = await this.redis
      .multi()
      .incr(key)
      .pexpire(key, w.end - now + 1000)
      .exec();
    if (!res) throw new Error('transaction aborted');
    for (const [err] of res) if (err) throw err;
    return verdict(Number(res[0]![1]), limit, now, w.end);
  }

  /** Nothing in process: the counter lives in the store. */
  forget(): void {}
}
