/**
 * Sliding window log (`enable_kv_rolling_limiter`): every request, blocked ones included, enters the
 * log; a request is admitted while the log holds fewer than `allowance` entries in the trailing window
 * (spike arrest: traffic resumes only after the rate stayed under the limit for a whole window).
 * Optional smoothing moves the allowance between threshold and rate (smoothing.ts).
 * Memory: exact in one process. Redis: one EVALSHA per check (atomic across gateways), or with
 * `enable_non_transactional_rate_limiter` one pipeline without a transaction (no smoothing there:
 * a smoothed limit always uses the script).
 */
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';
import type { LimitSpec } from '../config/types.js';
import { initialState, smoothingActive, smoothingStep, type SmoothingState } from './smoothing.js';
import { allowanceOf, result, type Limiter, type LimitResult, type SmoothingEvent } from './types.js';

export type SmoothingListener = (e: SmoothingEvent, allowance: number) => void;

let seq = 0;
const PROC = Math.random().toString(36).slice(2, 8);
export function uniqueMember(now: number): string {
  seq = (seq + 1) % 1e9;
  return `${now}-${PROC}-${seq}`;
}

/** Redis keys of one bucket share a hash slot (hash tag), so scripts never hit CROSSSLOT. */
export function redisKeys(bucket: string): { log: string; smooth: string; sentinel: string } {
  return { log: `gw:{${bucket}}:log`, smooth: `gw:{${bucket}}:sm`, sentinel: `gw:{${bucket}}:sentinel` };
}

export class MemorySlidingLog implements Limiter {
  readonly name = 'sliding_log';
  private readonly logs = new Map<string, number[]>();
  private readonly smooth = new Map<string, SmoothingState>();

  constructor(
    private readonly clock: Clock,
    private readonly onSmoothing: SmoothingListener = () => {},
    private readonly smoothingEnabled = true,
  ) {}

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    return this.checkSync(bucket, limit, true);
  }

  /** `record: false` counts without adding (the sentinel's read). */
  checkSync(bucket: string, limit: LimitSpec, record: boolean): LimitResult {
    const now = this.clock.now();
    const win = limit.per * 1000;
    let log = this.logs.get(bucket);
    if (!log) this.logs.set(bucket, (log = []));
    let drop = 0;
    while (drop < log.length && log[drop]! <= now - win) drop++;
    if (drop) log.splice(0, drop);
    const count = log.length;
    if (record) log.push(now);

    let allowance = allowanceOf(limit.rate);
    if (this.smoothingEnabled && smoothingActive(limit.smoothing)) {
      const s = limit.smoothing;
      const st = this.smooth.get(bucket) ?? initialState(s, limit.rate);
      const step = smoothingStep(st, count + 1, s, limit.rate, now);
      this.smooth.set(bucket, step.state);
      if (step.event) {
        this.onSmoothing(
          { event: step.event, limiterKey: bucket, oldAllowance: st.allowance, newAllowance: step.state.allowance, time: new Date(now).toISOString() },
          step.state.allowance,
        );
      }
      allowance = allowanceOf(step.state.allowance);
    }
    const n = record ? count + 1 : count;
    const allowed = count < allowance;
    const idx = n - allowance;
    const next = idx >= 0 && log[idx] !== undefined ? log[idx]! + win : now;
    return result(allowed, allowance, allowed ? allowance - n : 0, now, next);
  }

  async reset(bucket: string): Promise<void> {
    this.logs.delete(bucket);
    this.smooth.delete(bucket);
  }
}

const SCRIPT = `
local now = tonumber(ARGV[1]); local win = tonumber(ARGV[2]); local rate = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local count = redis.call('ZCARD', KEYS[1])
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], win)
local allowance = rate
local ev = 0
local old = rate
if ARGV[5] == '1' then
  local thr = tonumber(ARGV[6]); local step = tonumber(ARGV[7]); local trig = tonumber(ARGV[8]); local delay = tonumber(ARGV[9])
  local lower = math.min(thr, rate)
  local st = redis.call('HMGET', KEYS[2], 'a', 't')
  local a = tonumber(st[1]) or lower
  local t = tonumber(st[2]) or 0
  old = a
  local r = count + 1
  local hold = (t == 0) or (now - t >= delay)
  if hold and r > a - step * trig and a < rate then
    a = math.min(a + step, rate); t = now; ev = 1
  elseif hold and r < a - step * (1 + trig) and a > lower then
    a = math.max(a - step, lower); t = now; ev = -1
  end
  redis.call('HSET', KEYS[2], 'a', tostring(a), 't', tostring(t))
  redis.call('PEXPIRE', KEYS[2], math.max(win, delay) * 10)
  allowance = a
end
local whole = math.floor(allowance)
local allowed = 0
if count < whole then allowed = 1 end
local n = count + 1
local nextTs = now
local idx = n - whole
if idx >= 0 then
  local e = redis.call('ZRANGE', KEYS[1], idx, idx, 'WITHSCORES')
  if e[2] then nextTs = tonumber(e[2]) + win end
end
return {allowed, n, tostring(allowance), tostring(nextTs), ev, tostring(old)}
`;

type ScriptClient = (Redis | Cluster) & {
  gwSlidingLog(log: string, smooth: string, ...args: (string | number)[]): Promise<[number, number, string, string, number, string]>;
};

export function defineSlidingLogScript(redis: Redis | Cluster): ScriptClient {
  const c = redis as ScriptClient;
  if (typeof c.gwSlidingLog !== 'function') redis.defineCommand('gwSlidingLog', { numberOfKeys: 2, lua: SCRIPT });
  return c;
}

export class RedisSlidingLog implements Limiter {
  readonly name = 'sliding_log';
  private readonly redis: ScriptClient;

  constructor(
    redis: Redis | Cluster,
    private readonly clock: Clock,
    private readonly opts: { transactional: boolean; smoothingEnabled: boolean },
    private readonly onSmoothing: SmoothingListener = () => {},
  ) {
    this.redis = defineSlidingLogScript(redis);
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const win = Math.round(limit.per * 1000);
    const k = redisKeys(bucket);
    const smooth = this.opts.smoothingEnabled && smoothingActive(limit.smoothing) ? limit.smoothing : undefined;
    if (!this.opts.transactional && !smooth) return this.pipelined(k.log, now, win, limit.rate);
    const [allowed, n, allowanceStr, nextStr, ev, oldStr] = await this.redis.gwSlidingLog(
      k.log,
      k.smooth,
      now,
      win,
      limit.rate,
      uniqueMember(now),
      smooth ? '1' : '0',
      smooth?.threshold ?? 0,
      smooth?.step ?? 0,
      smooth?.trigger ?? 0,
      (smooth?.delay ?? 0) * 1000,
    );
    const allowance = Number(allowanceStr);
    if (ev !== 0) {
      this.onSmoothing(
        { event: ev > 0 ? 'RateLimitSmoothingUp' : 'RateLimitSmoothingDown', limiterKey: bucket, oldAllowance: Number(oldStr), newAllowance: allowance, time: new Date(now).toISOString() },
        allowance,
      );
    }
    const whole = allowanceOf(allowance);
    return result(allowed === 1, whole, allowed === 1 ? whole - n : 0, now, Number(nextStr));
  }

  private async pipelined(log: string, now: number, win: number, rate: number): Promise<LimitResult> {
    const allowance = allowanceOf(rate);
    const res = await this.redis
      .pipeline()
      .zremrangebyscore(log, '-inf', now - win)
      .zcard(log)
      .zadd(log, now, uniqueMember(now))
      .pexpire(log, win)
      .zrange(log, String(-Math.max(allowance, 1)), String(-Math.max(allowance, 1)), 'WITHSCORES')
      .exec();
    if (!res) throw new Error('pipeline aborted');
    for (const [err] of res) if (err) throw err;
    const count = Number(res[1]![1]);
    const n = count + 1;
    const allowed = count < allowance;
    const edge = res[4]![1] as string[];
    const next = n >= allowance && edge[1] !== undefined ? Number(edge[1]) + win : now;
    return result(allowed, allowance, allowed ? allowance - n : 0, now, next);
  }

  async reset(bucket: string): Promise<void> {
    const k = redisKeys(bucket);
    await this.redis.del(k.log, k.smooth);
  }
}
