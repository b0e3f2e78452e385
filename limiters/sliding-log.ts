/**
 * Sliding window log (`enable_kv_rolling_limiter`): every request, blocked ones included, enters the
 * log; a request is admitted while the log holds fewer than `allowance` entries in the trailing window
 * (before adding it). Spike arrest follows: traffic resumes only after the rate stayed under the limit
 * for a whole window. Optional smoothing moves the allowance between threshold and rate (smoothing.ts).
 *   Memory: exact in one process.
 *   Redis: one EVALSHA per check, atomic across gateways; with `enable_non_transactional_rate_limiter`
 *   one pipeline without MULTI (ZREMRANGEBYSCORE, ZADD, ZCARD, PEXPIRE, ZRANGE, and HGETALL of the bucket's
 *   DRL counter: tokens the DRL granted in its window count as logged). Counting after the add
 *   means interleaved pipelines can only refuse too much, never admit too much. A smoothed limit always
 *   uses the script (the allowance must move atomically with the count).
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import { coalesceWrites, type StoreClient } from '../lib/store/redis.js';
import { defineScript, luaScript, type ScriptRunner } from '../lib/store/scripts.js';
import { bucketKeys, storeKeys, uniqueMember } from '../contract/store-keys.js';
import type { LimitSpec } from '../contract/config.js';
import { initialState, smoothingActive, smoothingStep, type SmoothingState } from './smoothing.js';
import { drlGranted, WINDOW_SLOTS } from './drl-counter.js';
import { allowanceOf, result, type Limiter, type LimitResult, type SmoothingListener } from './types.js';

const windowMs = (per: number): number => Math.max(1, Math.round(per * 1000));

/**
 * How long an idle bucket's smoothing state (allowance, last event) is kept: at least a day, so the first
 * requests after an idle spell step the allowance down with their RateLimitSmoothingDown events (and gauge
 * moves) instead of it restarting silently at the threshold (docs/contract.md#smoothing).
 */
const SMOOTHING_MIN_TTL_MS = 86_400_000;
const smoothingTtlMs = (win: number, delayMs: number): number =>
  Math.max(Math.max(win, delayMs) * 10, SMOOTHING_MIN_TTL_MS);

export class MemorySlidingLog implements Limiter {
  readonly name = 'sliding_log';
  private readonly logs: ExpiringMap<number[]>;
  private readonly smooth: ExpiringMap<SmoothingState>;
  /** Requests refused without a log entry (the sentinel's), per smoothed bucket: counted in smoothing's R. */
  private readonly unlogged: ExpiringMap<number[]>;

  constructor(
    private readonly clock: Clock,
    private readonly onSmoothing: SmoothingListener = () => {},
    private readonly smoothingEnabled = true,
  ) {
    this.logs = new ExpiringMap(clock);
    this.smooth = new ExpiringMap(clock);
    this.unlogged = new ExpiringMap(clock);
  }

  /**
   * A request refused without entering the log (the sentinel refuses with one read): smoothing's measured
   * rate R still counts it, or R would drop to the admitted requests after every sentinel and the
   * allowance step down under a steady load; and the allowance keeps moving while the sentinel holds
   * (not only with log writes, which come once a window then). Returns the (smoothed) allowance.
   */
  refuseUnlogged(bucket: string, limit: LimitSpec): number {
    if (!this.smoothingEnabled || !smoothingActive(limit.smoothing)) return allowanceOf(limit.rate);
    const now = this.clock.now();
    const win = windowMs(limit.per);
    const seen = this.unlogged.get(bucket, now) ?? [];
    seen.push(now);
    this.unlogged.set(bucket, seen, now + win);
    return this.allowance(bucket, limit, now, win, this.window(bucket, now, win).length);
  }

  /** The bucket's log with the entries older than the window dropped. */
  private window(bucket: string, now: number, win: number): number[] {
    const log = this.logs.get(bucket, now) ?? [];
    let drop = 0;
    while (drop < log.length && log[drop]! <= now - win) drop++;
    if (drop) log.splice(0, drop);
    return log;
  }

  /**
   * The allowance for a request: the rate, or with smoothing the allowance after a step of the state
   * machine with R = `logged` (the log's entries, the current request included when it is to enter it)
   * plus the refusals recorded without a log entry.
   */
  private allowance(bucket: string, limit: LimitSpec, now: number, win: number, logged: number): number {
    if (!this.smoothingEnabled || !smoothingActive(limit.smoothing)) return allowanceOf(limit.rate);
    const s = limit.smoothing;
    const st = this.smooth.get(bucket, now) ?? initialState(s, limit.rate);
    const step = smoothingStep(st, logged + this.unloggedIn(bucket, now, win), s, limit.rate, now);
    this.smooth.set(bucket, step.state, now + smoothingTtlMs(win, s.delay * 1000));
    if (step.event) {
      this.onSmoothing(
        {
          event: step.event,
          limiterKey: bucket,
          oldAllowance: step.from,
          newAllowance: step.state.allowance,
          time: new Date(now).toISOString(),
        },
        step.state.allowance,
      );
    }
    return allowanceOf(step.state.allowance);
  }

  check(bucket: string, limit: LimitSpec, tentative = false): LimitResult {
    const now = this.clock.now();
    const win = windowMs(limit.per);
    const log = this.window(bucket, now, win);
    const count = log.length;
    const allowance = this.allowance(bucket, limit, now, win, count + 1);
    const allowed = count < allowance;
    // every request enters the log, a refused one included; a tentative check (throttling) only when admitted
    if (allowed || !tentative) {
      log.push(now);
      this.logs.set(bucket, log, now + win);
    }
    const n = log.length;
    // one more is admitted once the entry at index n - allowance has left the window
    const edge = log[n - allowance];
    const next = allowance === 0 ? now + win : n - allowance >= 0 && edge !== undefined ? edge + win : now;
    return result(allowed, allowance, allowance - n, now, next);
  }

  private unloggedIn(bucket: string, now: number, win: number): number {
    const seen = this.unlogged.get(bucket, now);
    if (!seen) return 0;
    let drop = 0;
    while (drop < seen.length && seen[drop]! <= now - win) drop++;
    if (drop) seen.splice(0, drop);
    return seen.length;
  }

  async reset(bucket: string): Promise<void> {
    this.forget(bucket);
  }

  forget(bucket: string): void {
    this.logs.delete(bucket);
    this.smooth.delete(bucket);
    this.unlogged.delete(bucket);
  }
}

/**
 * sliding-log.lua. KEYS: log, smoothing hash, sentinel, unlogged (the sentinel's refusals, counted in
 * smoothing's R), the DRL counter, the sentinel's spare leases. ARGV: now ms, window ms, rate, member, mode
 * ('0' a request, '1' a request with the sentinel (logged, admitted already), '2' a tentative check
 * (throttling): logged only when admitted, '3' a request the sentinel refused: recorded in unlogged,
 * smoothing stepped, nothing admitted or logged, '4' a sentinel claim: refused while a sentinel stands,
 * else admitted and logged only while the log has room), the spare lease asked for (gateway id or '',
 * demand per s, life ms; sentinel.ts), and only for a smoothed limit: threshold, step, trigger, delay ms.
 * Returns {allowed, n (entries after the add), allowance, next admission ms (a standing sentinel's until for
 * a refused claim), event (1 up, -1 down, 0), old allowance, spare lease cap, its until ms (0, 0 when not asked)}.
 * In sentinel and claim modes, a log reaching the allowance writes the sentinel (value = until ms) too.
 * A stored allowance is first brought within [threshold, rate] of the limit as it is now (the limit may
 * have changed since it was stored).
 */
/**
 * A sentinel gateway's spare lease is counted for others this long after it lived out: an admission made
 * under it may still have its log write on the way (sentinel.ts).
 */
export const SPARE_GRACE_MS = 1000;

const SCRIPT = luaScript(import.meta.url, 'sliding-log.lua', { SMOOTHING_MIN_TTL_MS, WINDOW_SLOTS, SPARE_GRACE_MS });

type ScriptReply = [number, number, string, string, number, string, number, number];

const MODES = { request: '0', sentinel: '1', tentative: '2', refused: '3', claim: '4' } as const;

export interface LogWrite {
  allowed: boolean;
  /** Entries in the window after this one was added. */
  n: number;
  allowance: number;
  /** When one more is admitted (ms); for a claim a standing sentinel refused, that sentinel's until. */
  next: number;
  /** The spare lease granted (sentinel and claim modes, when asked): tokens and until when (ms); 0, 0 otherwise. */
  spare: number;
  spareUntil: number;
}

/** A sentinel gateway's ask for a spare lease (sentinel.ts): its id, its demand on the bucket (per s), the lease's life (ms). */
export interface SpareAsk {
  id: string;
  demand: number;
  lifeMs: number;
}

/** The script's client side, shared by the sliding log and the sentinel's background write. */
export class RedisLogScript {
  private readonly run: ScriptRunner<ScriptReply>;
  constructor(
    private readonly redis: StoreClient,
    private readonly smoothingEnabled: boolean,
    private readonly onSmoothing: SmoothingListener,
  ) {
    this.run = defineScript<ScriptReply>(redis, 'gwSlidingLog', 6, SCRIPT);
  }

  /** `refused`: a smoothed limit's request the sentinel refused (counted in R, smoothing stepped, nothing logged). */
  async write(
    bucket: string,
    limit: LimitSpec,
    now: number,
    mode: keyof typeof MODES,
    ask?: SpareAsk,
  ): Promise<LogWrite> {
    const win = windowMs(limit.per);
    const smooth = this.smoothingEnabled && smoothingActive(limit.smoothing) ? limit.smoothing : undefined;
    const k = bucketKeys(bucket);
    const args: (string | number)[] = [now, win, limit.rate, uniqueMember(now), MODES[mode]];
    if (ask) args.push(ask.id, ask.demand, ask.lifeMs);
    else args.push('', 0, 0);
    if (smooth) args.push(smooth.threshold, smooth.step, smooth.trigger, Math.round(smooth.delay * 1000));
    coalesceWrites(this.redis);
    const [allowed, n, allowanceStr, nextStr, ev, oldStr, spare, spareUntil] = await this.run(
      [k.log, k.smoothing, k.sentinel, k.unlogged, storeKeys.drl(bucket), k.spare],
      args,
    );
    const allowance = Number(allowanceStr);
    if (ev !== 0) {
      this.onSmoothing(
        {
          event: ev > 0 ? 'RateLimitSmoothingUp' : 'RateLimitSmoothingDown',
          limiterKey: bucket,
          oldAllowance: Number(oldStr),
          newAllowance: allowance,
          time: new Date(now).toISOString(),
        },
        allowance,
      );
    }
    return {
      allowed: allowed === 1,
      n,
      allowance: allowanceOf(allowance),
      next: Number(nextStr),
      spare: Number(spare),
      spareUntil: Number(spareUntil),
    };
  }
}

export class RedisSlidingLog implements Limiter {
  readonly name = 'sliding_log';
  private readonly script: RedisLogScript;

  constructor(
    private readonly redis: StoreClient,
    private readonly clock: Clock,
    private readonly opts: { transactional: boolean; smoothingEnabled: boolean },
    onSmoothing: SmoothingListener = () => {},
  ) {
    this.script = new RedisLogScript(redis, opts.smoothingEnabled, onSmoothing);
  }

  async check(bucket: string, limit: LimitSpec, tentative = false): Promise<LimitResult> {
    const now = this.clock.now();
    const smoothed = this.opts.smoothingEnabled && smoothingActive(limit.smoothing);
    // a tentative check is logged only when admitted, which a pipeline cannot decide: it takes the script
    if (!this.opts.transactional && !smoothed && !tentative) return this.pipelined(bucket, limit, now);
    const w = await this.script.write(bucket, limit, now, tentative ? 'tentative' : 'request');
    return result(w.allowed, w.allowance, w.allowance - w.n, now, w.next);
  }

  /** Non-transactional: one pipeline, no MULTI. */
  private async pipelined(bucket: string, limit: LimitSpec, now: number): Promise<LimitResult> {
    const log = storeKeys.log(bucket);
    const win = windowMs(limit.per);
    const allowance = allowanceOf(limit.rate);
    const res = await this.redis
      .pipeline()
      .zremrangebyscore(log, '-inf', now - win)
      .zadd(log, now, uniqueMember(now))
      .zcard(log)
      .pexpire(log, win)
      .zrange(log, String(-Math.max(allowance, 1)), String(-Math.max(allowance, 1)), 'WITHSCORES')
      .hgetall(storeKeys.drl(bucket))
      .exec();
    if (!res) throw new Error('pipeline aborted');
    for (const [err] of res) if (err) throw err;
    const { pre, free } = drlGranted(res[5]![1] as Record<string, string>, now);
    const n = Number(res[2]![1]) + pre;
    const allowed = n <= allowance;
    const edge = res[4]![1] as string[];
    let next = allowance === 0 ? now + win : n >= allowance && edge[1] !== undefined ? Number(edge[1]) + win : now;
    if (pre > 0 && !allowed) next = Math.min(next > now ? next : Infinity, free);
    return result(allowed, allowance, allowance - n, now, next === Infinity ? now + win : next);
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(storeKeys.log(bucket), storeKeys.smoothing(bucket));
  }

  /** Nothing in process: the log lives in the store. */
  forget(): void {}
}
