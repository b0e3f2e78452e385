/**
 * Fixed window (`enable_fixed_window_rate_limiter`): one counter per epoch-aligned window
 * (floor(now / per)), expiring with it. Once `rate` is reached, requests are refused until the window
 * ends, then the counter restarts. Constant store use; no smoothing.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';
import type { LimitSpec } from '../config/types.js';
import { allowanceOf, result, type Limiter, type LimitResult } from './types.js';

function window(now: number, per: number): { id: number; end: number; ms: number } {
  const ms = Math.max(1, Math.round(per * 1000));
  const id = Math.floor(now / ms);
  return { id, end: (id + 1) * ms, ms };
}

export class MemoryFixedWindow implements Limiter {
  readonly name = 'fixed_window';
  private readonly counters = new Map<string, { id: number; count: number }>();
  constructor(private readonly clock: Clock) {}

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const w = window(now, limit.per);
    let c = this.counters.get(bucket);
    if (!c || c.id !== w.id) this.counters.set(bucket, (c = { id: w.id, count: 0 }));
    c.count++;
    const allowance = allowanceOf(limit.rate);
    const allowed = c.count <= allowance;
    return result(allowed, allowance, allowance - c.count, now, allowed && c.count < allowance ? now : w.end);
  }

  async reset(bucket: string): Promise<void> {
    this.counters.delete(bucket);
  }
}

export class RedisFixedWindow implements Limiter {
  readonly name = 'fixed_window';
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly clock: Clock,
  ) {}

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const w = window(now, limit.per);
    const key = `gw:{${bucket}}:fw:${w.id}`;
    const res = await this.redis.multi().incr(key).pexpire(key, w.end - now + 1000).exec();
    if (!res) throw new Error('transaction aborted');
    for (const [err] of res) if (err) throw err;
    const count = Number(res[0]![1]);
    const allowance = allowanceOf(limit.rate);
    const allowed = count <= allowance;
    return result(allowed, allowance, allowance - count, now, allowed && count < allowance ? now : w.end);
  }
}
