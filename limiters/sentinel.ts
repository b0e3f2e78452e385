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
 * at most allowance + k − 1. Against bursts (whose "round trip" stretches with the gateway's backlog)
 * each gateway also refuses while `allowance` of its admissions are on their way to the log, and while
 * the last write it saw reached the allowance (a read answered after that write may not see its
 * sentinel yet): about one allowance per gateway. In memory the log is written inline, so it is exact.
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import type { StoreClient } from '../lib/store/redis.js';
import { storeKeys } from '../contract/store-keys.js';
import { initialState, smoothingActive } from './smoothing.js';
import type { LimitSpec } from '../contract/config.js';
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
    // smoothing's R counts the refusal and the allowance keeps moving (the rate unless smoothed)
    if (until !== undefined) return result(false, this.log.refuseUnlogged(bucket, limit), 0, now, until);
    const r = this.log.check(bucket, limit, tentative);
    if (r.allowed && r.remaining > 0) return r;
    // the limit is reached: the sentinel refuses for one window, so that is when one more is admitted
    const win = limit.per * 1000;
    this.sentinels.set(bucket, now + win, now + win);
    return result(r.allowed, r.limit, 0, now, now + win);
  }

  async reset(bucket: string): Promise<void> {
    this.forget(bucket);
  }

  forget(bucket: string): void {
    this.sentinels.delete(bucket);
    this.log.forget(bucket);
  }
}

export class RedisSentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly script: RedisLogScript;
  /** Per bucket, what the last log write landed with: the count, the (smoothed) allowance, its time. */
  private readonly last: ExpiringMap<{ n: number; allowance: number; at: number }>;
  /** Per smoothed bucket, the allowance the last script call reported (log write or recorded refusal): the headers' limit. */
  private readonly allowances: ExpiringMap<number>;
  /** Per bucket, this gateway's admissions whose log write has not landed yet. */
  private readonly inflight = new Map<string, number>();
  private readonly pending = new Set<Promise<void>>();
  private readonly smoothingEnabled: boolean;

  constructor(
    private readonly redis: StoreClient,
    private readonly clock: Clock,
    opts: { smoothingEnabled: boolean },
    onSmoothing: SmoothingListener = () => {},
    private readonly onBackgroundError: (e: Error) => void = () => {},
  ) {
    this.script = new RedisLogScript(redis, opts.smoothingEnabled, onSmoothing);
    this.smoothingEnabled = opts.smoothingEnabled;
    this.last = new ExpiringMap(clock);
    this.allowances = new ExpiringMap(clock);
    // a (re)connected store may have lost its data (a restart without persistence, a failover): what the
    // last writes reported no longer mirrors its sentinels
    redis.on('ready', () => {
      this.last.clear();
      this.allowances.clear();
    });
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const until = Number((await this.redis.get(storeKeys.sentinel(bucket))) ?? 0);
    const now = this.clock.now();
    const seen = this.last.get(bucket, now);
    // the smoothed allowance as of the last script call; before any, where smoothing starts (threshold)
    const allowance = this.allowances.get(bucket, now) ?? seen?.allowance ?? this.startingAllowance(limit);
    if (until > now) return this.refused(bucket, limit, allowance, now, until);
    const win = limit.per * 1000;
    // The last write this gateway saw reached the allowance: that script wrote the sentinel, until one
    // window after the write (when this entry expires too). A read sent before that write but answered
    // after it says "no sentinel"; this answers for it.
    if (seen && seen.n >= seen.allowance) return this.refused(bucket, limit, allowance, now, seen.at + win);
    const inflight = this.inflight.get(bucket) ?? 0;
    // This gateway alone has a whole allowance of admissions on their way to the log: the window is full
    // whatever the store says yet. Without this, a burst whose sentinel reads were all answered before
    // the first log write landed was admitted whole. The writes in flight write the sentinel.
    if (inflight >= allowance) return this.refused(bucket, limit, allowance, now, now + win);
    this.inflight.set(bucket, inflight + 1);
    const p = this.writeLog(bucket, limit, now)
      .catch((e: unknown) => this.onBackgroundError(e instanceof Error ? e : new Error(String(e))))
      .finally(() => this.landed(bucket));
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
    // the count as of the last write, plus this gateway's admissions since (other gateways' are not known
    // until the next write lands: Remaining can be high by what they admitted meanwhile)
    const remaining = allowance - (seen?.n ?? 0) - inflight - 1;
    // this request's log write reaches the allowance and writes the sentinel: the next admission is a window away
    return result(true, allowance, remaining, now, remaining > 0 ? now : now + win);
  }

  /**
   * A refusal without a log write. For a smoothed limit the log script records it, off the request path:
   * it counts in smoothing's R (requests in the trailing window, refused ones included; without it R fell
   * to the admitted requests after every sentinel and the allowance stepped down under a steady load), and
   * smoothing steps with it, so the allowance keeps moving while the sentinel holds (it moved only with
   * log writes: once a window).
   */
  private refused(bucket: string, limit: LimitSpec, allowance: number, now: number, until: number): LimitResult {
    if (this.smoothingEnabled && smoothingActive(limit.smoothing)) {
      const p = this.script
        .write(bucket, limit, now, 'refused')
        .then((w) => this.allowances.set(bucket, w.allowance, now + allowanceTtl(limit)))
        .catch((e: unknown) => this.onBackgroundError(e instanceof Error ? e : new Error(String(e))));
      this.pending.add(p);
      void p.finally(() => this.pending.delete(p));
    }
    return result(false, allowance, 0, now, until);
  }

  /** The allowance a bucket this gateway has no news of starts at: the threshold when smoothed, else the rate. */
  private startingAllowance(limit: LimitSpec): number {
    const smoothed = this.smoothingEnabled && smoothingActive(limit.smoothing);
    return allowanceOf(smoothed ? initialState(limit.smoothing!, limit.rate).allowance : limit.rate);
  }

  private landed(bucket: string): void {
    const left = (this.inflight.get(bucket) ?? 1) - 1;
    if (left > 0) this.inflight.set(bucket, left);
    else this.inflight.delete(bucket);
  }

  /** Off the request path: add to the log; the script writes the sentinel when the log reaches the allowance. */
  private async writeLog(bucket: string, limit: LimitSpec, now: number): Promise<void> {
    const w = await this.script.write(bucket, limit, now, 'sentinel');
    this.last.set(bucket, { n: w.n, allowance: w.allowance, at: now }, now + limit.per * 1000);
    if (this.smoothingEnabled && smoothingActive(limit.smoothing))
      this.allowances.set(bucket, w.allowance, now + allowanceTtl(limit));
  }

  /** Resolves when every background log write started so far has finished (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(
      storeKeys.log(bucket),
      storeKeys.smoothing(bucket),
      storeKeys.sentinel(bucket),
      storeKeys.unlogged(bucket),
    );
    this.forget(bucket);
  }

  /** What the last writes reported (the store's sentinel and log stay); the in-flight count drains by itself. */
  forget(bucket: string): void {
    this.last.delete(bucket);
    this.allowances.delete(bucket);
  }
}

/** How long a reported allowance stands for the headers without news: a few windows (or hold-offs). */
const allowanceTtl = (limit: LimitSpec): number => Math.max(limit.per, limit.smoothing?.delay ?? 0) * 3000;
