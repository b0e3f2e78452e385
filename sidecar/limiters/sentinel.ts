/**
 * Sentinel variant (`enable_sentinel_rate_limiter`): on reaching the limit a sentinel is written that
 * refuses for `per` seconds; while it exists a request is refused after one cheap read (GET of the
 * sentinel, whose value is the clock ms until which it holds). Admitted requests are written to the
 * sliding log off the request path (fire and forget; errors go to onBackgroundError); the script that
 * writes the log also writes the sentinel, atomically, when the log reaches the allowance.
 *
 * Overshoot bound (docs/limiter-engine.md, tested in test/integration/limiters/sentinel.test.ts):
 * admitted requests per window ≤ allowance + the requests whose sentinel read was served while the
 * log write of an admitted request was still in flight, i.e. the requests arriving during one store
 * round trip. With requests arriving in waves of k (each wave after the previous writes landed),
 * at most allowance + k − 1. In memory the log is written inline, so it is exact.
 */
import type { Clock } from '../../lib/clock.js';
import { ExpiringMap } from '../../lib/store/memory.js';
import type { StoreClient } from '../../lib/store/redis.js';
import { storeKeys } from '../../lib/store/keys.js';
import type { LimitSpec } from '../config/types.js';
import { MemorySlidingLog, RedisLogScript } from './sliding-log.js';
import { allowanceOf, result, type Limiter, type LimitResult, type SmoothingListener } from './types.js';

export class MemorySentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly sentinels: ExpiringMap<number>;
  private readonly log: MemorySlidingLog;

  constructor(
    private readonly clock: Clock,
    onSmoothing?: SmoothingListener,
    smoothingEnabled = true,
  ) {
    this.sentinels = new ExpiringMap(clock);
    this.log = new MemorySlidingLog(clock, onSmoothing, smoothingEnabled);
  }

  check(bucket: string, limit: LimitSpec, tentative = false): LimitResult {
    const now = this.clock.now();
    const until = this.sentinels.get(bucket, now);
    if (until !== undefined) return result(false, allowanceOf(limit.rate), 0, now, until);
    const r = this.log.check(bucket, limit, tentative);
    if (r.allowed && r.remaining > 0) return r;
    // the limit is reached: the sentinel refuses for one window, so that is when one more is admitted
    const win = limit.per * 1000;
    this.sentinels.set(bucket, now + win, now + win);
    return result(r.allowed, r.limit, 0, now, now + win);
  }

  async reset(bucket: string): Promise<void> {
    this.sentinels.delete(bucket);
    await this.log.reset(bucket);
  }
}

export class RedisSentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly script: RedisLogScript;
  /** Last log count per bucket, for X-RateLimit-Remaining (the request path never counts). */
  private readonly lastCount: ExpiringMap<number>;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly redis: StoreClient,
    private readonly clock: Clock,
    opts: { smoothingEnabled: boolean },
    onSmoothing: SmoothingListener = () => {},
    private readonly onBackgroundError: (e: Error) => void = () => {},
  ) {
    this.script = new RedisLogScript(redis, opts.smoothingEnabled, onSmoothing);
    this.lastCount = new ExpiringMap(clock);
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const allowance = allowanceOf(limit.rate);
    const until = Number((await this.redis.get(storeKeys.sentinel(bucket))) ?? 0);
    if (until > now) return result(false, allowance, 0, now, until);
    const p = this.writeLog(bucket, limit, now).catch((e: unknown) => this.onBackgroundError(e instanceof Error ? e : new Error(String(e))));
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
    const remaining = allowance - (this.lastCount.get(bucket) ?? 0) - 1;
    // this request's log write reaches the allowance and writes the sentinel: the next admission is a window away
    return result(true, allowance, remaining, now, remaining > 0 ? now : now + limit.per * 1000);
  }

  /** Off the request path: add to the log; the script writes the sentinel when the log reaches the allowance. */
  private async writeLog(bucket: string, limit: LimitSpec, now: number): Promise<void> {
    const w = await this.script.write(bucket, limit, now, 'sentinel');
    this.lastCount.set(bucket, w.n, now + limit.per * 1000);
  }

  /** Resolves when every background log write started so far has finished (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(storeKeys.log(bucket), storeKeys.smoothing(bucket), storeKeys.sentinel(bucket));
    this.lastCount.delete(bucket);
  }
}
