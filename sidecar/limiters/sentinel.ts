/**
 * Sentinel variant (`enable_sentinel_rate_limiter`): on reaching the limit a sentinel with TTL `per` is
 * written; while it exists requests are refused with one cheap read (PTTL). The log write leaves the
 * request path: it runs after the answer is decided, and sets the sentinel when the log reaches the
 * allowance.
 *
 * Overshoot bound (documented in docs/limiter-engine.md, tested): admitted requests per window ≤
 * rate + the requests whose PTTL read happened while the log write that reached the limit was still
 * in flight — i.e. the requests that arrive during one store round trip. In memory it is exact.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';
import type { LimitSpec } from '../config/types.js';
import { defineSlidingLogScript, MemorySlidingLog, redisKeys, uniqueMember, type SmoothingListener } from './sliding-log.js';
import { allowanceOf, result, type Limiter, type LimitResult } from './types.js';
import { smoothingActive } from './smoothing.js';

export class MemorySentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly sentinels = new Map<string, number>(); // bucket → expiry ms
  private readonly log: MemorySlidingLog;

  constructor(
    private readonly clock: Clock,
    onSmoothing?: SmoothingListener,
    smoothingEnabled = true,
  ) {
    this.log = new MemorySlidingLog(clock, onSmoothing, smoothingEnabled);
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const until = this.sentinels.get(bucket);
    if (until !== undefined && until > now) return result(false, allowanceOf(limit.rate), 0, now, until);
    // the log write (in memory it costs nothing to do it inline, and it is exact)
    const r = this.log.checkSync(bucket, limit, true);
    if (!r.allowed || r.remaining === 0) this.sentinels.set(bucket, now + limit.per * 1000);
    if (!r.allowed) return result(false, r.limit, 0, now, now + limit.per * 1000);
    return r;
  }

  async reset(bucket: string): Promise<void> {
    this.sentinels.delete(bucket);
    await this.log.reset(bucket);
  }
}

const SET_SENTINEL = `
local r = redis.call('PTTL', KEYS[1])
if r > 0 then return r end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return 0
`;

export class RedisSentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly redis: ReturnType<typeof defineSlidingLogScript>;
  /** Last log count per bucket, for the X-RateLimit-Remaining header (the request path never counts). */
  private readonly lastCount = new Map<string, number>();

  constructor(
    redis: Redis | Cluster,
    private readonly clock: Clock,
    private readonly opts: { smoothingEnabled: boolean },
    private readonly onSmoothing: SmoothingListener = () => {},
    private readonly onBackgroundError: (e: Error) => void = () => {},
  ) {
    this.redis = defineSlidingLogScript(redis);
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const k = redisKeys(bucket);
    const allowance = allowanceOf(limit.rate);
    const pttl = await this.redis.pttl(k.sentinel);
    if (pttl > 0) return result(false, allowance, 0, now, now + pttl);
    void this.writeLog(bucket, limit, now).catch((e: Error) => this.onBackgroundError(e));
    const seen = this.lastCount.get(bucket) ?? 0;
    return result(true, allowance, allowance - seen - 1, now, now);
  }

  /** Off the request path: add to the log; on reaching the allowance, write the sentinel with TTL per. */
  private async writeLog(bucket: string, limit: LimitSpec, now: number): Promise<void> {
    const k = redisKeys(bucket);
    const win = Math.round(limit.per * 1000);
    const smooth = this.opts.smoothingEnabled && smoothingActive(limit.smoothing) ? limit.smoothing : undefined;
    const [, n, allowanceStr, , ev, oldStr] = await this.redis.gwSlidingLog(
      k.log, k.smooth, now, win, limit.rate, uniqueMember(now), smooth ? '1' : '0',
      smooth?.threshold ?? 0, smooth?.step ?? 0, smooth?.trigger ?? 0, (smooth?.delay ?? 0) * 1000,
    );
    const allowance = Number(allowanceStr);
    this.lastCount.set(bucket, n);
    if (this.lastCount.size > 100_000) this.lastCount.clear();
    if (ev !== 0) {
      this.onSmoothing(
        { event: ev > 0 ? 'RateLimitSmoothingUp' : 'RateLimitSmoothingDown', limiterKey: bucket, oldAllowance: Number(oldStr), newAllowance: allowance, time: new Date(now).toISOString() },
        allowance,
      );
    }
    if (n >= allowanceOf(allowance)) await this.redis.eval(SET_SENTINEL, 1, k.sentinel, String(win));
  }

  async reset(bucket: string): Promise<void> {
    const k = redisKeys(bucket);
    await this.redis.del(k.log, k.smooth, k.sentinel);
    this.lastCount.delete(bucket);
  }
}
