/**
 * Sliding window log (`enable_kv_rolling_limiter`): every request, blocked ones included, enters the
 * log; a request is admitted while the log holds fewer than `allowance` entries in the trailing window
 * (before adding it). Spike arrest follows: traffic resumes only after the rate stayed under the limit
 * for a whole window. Optional smoothing moves the allowance between threshold and rate (smoothing.ts).
 *   Memory: exact in one process.
 *   Redis: one EVALSHA per check, atomic across gateways; with `enable_non_transactional_rate_limiter`
 *   one pipeline without MULTI (ZREMRANGEBYSCORE, ZADD, ZCARD, PEXPIRE, ZRANGE). Counting after the add
 *   means interleaved pipelines can only refuse too much, never admit too much. A smoothed limit always
 *   uses the script (the allowance must move atomically with the count).
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import { coalesceWrites, type StoreClient } from '../lib/store/redis.js';
import { defineScript, type ScriptRunner } from '../lib/store/scripts.js';
import { bucketKeys, storeKeys, uniqueMember } from '../contract/store-keys.js';
import type { LimitSpec } from '../contract/config.js';
import { initialState, smoothingActive, smoothingStep, type SmoothingState } from './smoothing.js';
import { allowanceOf, result, type Limiter, type LimitResult, type SmoothingListener } from './types.js';

const windowMs = (per: number): number => Math.max(1, Math.round(per * 1000));

/**
 * How long an idle bucket's smoothing state (allowance, last event) is kept: at least a day. It used to
 * go after 10 windows, and the allowance then restarted at the threshold without the
 * RateLimitSmoothingDown events (and gauge moves) of falling there step by step; kept, the first
 * requests after the idle spell step it down with their events (SPEC §3.8).
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
   * (it moved only with log writes: once a window). Returns the (smoothed) allowance.
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
    this.logs.delete(bucket);
    this.smooth.delete(bucket);
    this.unlogged.delete(bucket);
  }
}

/**
 * KEYS: log, smoothing hash, sentinel, unlogged (the sentinel's refusals, counted in smoothing's R). ARGV: now ms, window ms, rate, member, mode ('0' a request,
 * '1' a request with the sentinel, '2' a tentative check (throttling): logged only when admitted, '3' a request the
 * sentinel refused: recorded in unlogged, smoothing stepped, nothing admitted or logged), and only for a
 * smoothed limit: threshold, step, trigger, delay ms (fewer arguments on the hot path).
 * Returns {allowed, n (entries after the add), allowance, next admission ms, event (1 up, -1 down, 0), old allowance}.
 * In sentinel mode, a log reaching the allowance writes the sentinel (value = until ms) too.
 * A stored allowance is first brought within [threshold, rate] of the limit as it is now (the limit may
 * have changed since it was stored).
 */
const SCRIPT = `
local now = tonumber(ARGV[1]); local win = tonumber(ARGV[2]); local rate = tonumber(ARGV[3])
local mode = ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local count = redis.call('ZCARD', KEYS[1])
local allowance = rate
local ev = 0
local old = rate
if mode == '3' then
  redis.call('ZADD', KEYS[4], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[4], win)
end
if #ARGV >= 9 then
  local thr = tonumber(ARGV[6]); local step = tonumber(ARGV[7]); local trig = tonumber(ARGV[8]); local delay = tonumber(ARGV[9])
  local lower = math.min(math.max(thr, 0), rate)
  local st = redis.call('HMGET', KEYS[2], 'a', 't')
  local a = math.min(math.max(tonumber(st[1]) or lower, lower), rate)
  local t = tonumber(st[2]) or 0
  old = a
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - win)
  local r = count + redis.call('ZCARD', KEYS[4])
  if mode ~= '3' then r = r + 1 end
  local hold = (t == 0) or (now - t >= delay)
  if hold and r > a - step * trig and a < rate then
    a = math.min(a + step, rate); t = now; ev = 1
  elseif hold and r < a - step * (1 + trig) and a > lower then
    a = math.max(a - step, lower); t = now; ev = -1
  end
  redis.call('HSET', KEYS[2], 'a', tostring(a), 't', tostring(t))
  redis.call('PEXPIRE', KEYS[2], math.max(math.max(win, delay) * 10, ${SMOOTHING_MIN_TTL_MS}))
  allowance = a
end
if mode == '3' then return {0, count, tostring(allowance), tostring(now), ev, tostring(old)} end
local whole = math.floor(allowance)
local allowed = 0
if count < whole then allowed = 1 end
local n = count
if allowed == 1 or mode ~= '2' then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], win)
  n = count + 1
end
local nextTs = now
if whole == 0 then
  nextTs = now + win
elseif n - whole >= 0 then
  local e = redis.call('ZRANGE', KEYS[1], n - whole, n - whole, 'WITHSCORES')
  if e[2] then nextTs = tonumber(e[2]) + win end
end
if mode == '1' and n >= whole then
  local until_ = tonumber(redis.call('GET', KEYS[3]) or '0')
  if until_ <= now then redis.call('SET', KEYS[3], tostring(now + win), 'PX', win) end
end
return {allowed, n, tostring(allowance), tostring(nextTs), ev, tostring(old)}
`;

type ScriptReply = [number, number, string, string, number, string];

const MODES = { request: '0', sentinel: '1', tentative: '2', refused: '3' } as const;

export interface LogWrite {
  allowed: boolean;
  /** Entries in the window after this one was added. */
  n: number;
  allowance: number;
  next: number;
}

/** The script's client side, shared by the sliding log and the sentinel's background write. */
export class RedisLogScript {
  private readonly run: ScriptRunner<ScriptReply>;
  constructor(
    private readonly redis: StoreClient,
    private readonly smoothingEnabled: boolean,
    private readonly onSmoothing: SmoothingListener,
  ) {
    this.run = defineScript<ScriptReply>(redis, 'gwSlidingLog', 4, SCRIPT);
  }

  /** `refused`: a smoothed limit's request the sentinel refused (counted in R, smoothing stepped, nothing logged). */
  async write(bucket: string, limit: LimitSpec, now: number, mode: keyof typeof MODES): Promise<LogWrite> {
    const win = windowMs(limit.per);
    const smooth = this.smoothingEnabled && smoothingActive(limit.smoothing) ? limit.smoothing : undefined;
    const k = bucketKeys(bucket);
    const args: (string | number)[] = [now, win, limit.rate, uniqueMember(now), MODES[mode]];
    if (smooth) args.push(smooth.threshold, smooth.step, smooth.trigger, Math.round(smooth.delay * 1000));
    coalesceWrites(this.redis);
    const [allowed, n, allowanceStr, nextStr, ev, oldStr] = await this.run(
      [k.log, k.smoothing, k.sentinel, k.unlogged],
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
    return { allowed: allowed === 1, n, allowance: allowanceOf(allowance), next: Number(nextStr) };
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
      .exec();
    if (!res) throw new Error('pipeline aborted');
    for (const [err] of res) if (err) throw err;
    const n = Number(res[2]![1]);
    const allowed = n <= allowance;
    const edge = res[4]![1] as string[];
    const next = allowance === 0 ? now + win : n >= allowance && edge[1] !== undefined ? Number(edge[1]) + win : now;
    return result(allowed, allowance, allowance - n, now, next);
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(storeKeys.log(bucket), storeKeys.smoothing(bucket));
  }
}
