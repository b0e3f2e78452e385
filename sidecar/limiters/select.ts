/**
 * Picks the algorithm for a limit (SPEC.md §3.2): one store algorithm for the whole gateway from the
 * options, and with the default DRL the drl_threshold switch: DRL when rate/per > drl_threshold × N,
 * else the sliding window log (Redis, or memory with no store). Re-evaluated on every check, so a
 * change of N moves limits at once. Store errors follow kv_failure_mode.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';
import { selectedAlgorithm, type GatewayOptionsT } from '../../lib/options.js';
import type { LimitSpec } from '../config/types.js';
import { DrlLimiter } from './drl.js';
import { MemoryFixedWindow, RedisFixedWindow } from './fixed-window.js';
import { MemoryQuota, RedisQuota, type QuotaStore } from './quota.js';
import { MemorySentinel, RedisSentinel } from './sentinel.js';
import { MemorySlidingLog, RedisSlidingLog, type SmoothingListener } from './sliding-log.js';
import { result, type Limiter, type LimitResult } from './types.js';

export interface LimiterDeps {
  options: GatewayOptionsT;
  clock: Clock;
  redis?: Redis | Cluster;
  /** Live gateways of the group (DRL); 1 with no store. */
  peers: () => number;
  onSmoothing?: SmoothingListener;
  onStoreError?: (e: Error) => void;
}

/** Wraps a store-backed limiter: a store error admits (open) or refuses (closed). */
class FailureMode implements Limiter {
  readonly name: string;
  constructor(
    private readonly inner: Limiter,
    private readonly mode: 'open' | 'closed',
    private readonly clock: Clock,
    private readonly onError: (e: Error) => void,
  ) {
    this.name = inner.name;
  }
  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    try {
      return await this.inner.check(bucket, limit);
    } catch (e) {
      this.onError(e as Error);
      const now = this.clock.now();
      return this.mode === 'open' ? result(true, Math.floor(limit.rate), Math.floor(limit.rate), now, now) : result(false, Math.floor(limit.rate), 0, now, now + 1000);
    }
  }
  async reset(bucket: string): Promise<void> {
    await this.inner.reset?.(bucket).catch(this.onError);
  }
}

export interface Limiters {
  forLimit(limit: LimitSpec): Limiter;
  quota: QuotaStore;
  all: Limiter[];
}

export function createLimiters(d: LimiterDeps): Limiters {
  const o = d.options;
  const onError = d.onStoreError ?? (() => {});
  const smoothing = o.enable_rate_limit_smoothing;
  const wrap = (l: Limiter): Limiter => (d.redis ? new FailureMode(l, o.kv_failure_mode, d.clock, onError) : l);
  const algo = selectedAlgorithm(o);
  const drl = new DrlLimiter(d.clock, d.peers);
  let store: Limiter;
  if (algo === 'fixed_window') store = d.redis ? new RedisFixedWindow(d.redis, d.clock) : new MemoryFixedWindow(d.clock);
  else if (algo === 'sentinel') store = d.redis ? new RedisSentinel(d.redis, d.clock, { smoothingEnabled: smoothing }, d.onSmoothing, onError) : new MemorySentinel(d.clock, d.onSmoothing, smoothing);
  else
    store = d.redis
      ? new RedisSlidingLog(d.redis, d.clock, { transactional: !o.enable_non_transactional_rate_limiter, smoothingEnabled: smoothing }, d.onSmoothing)
      : new MemorySlidingLog(d.clock, d.onSmoothing, smoothing);
  const storeLimiter = wrap(store);
  const quota: QuotaStore = d.redis ? new RedisQuota(d.redis, d.clock) : new MemoryQuota(d.clock);

  return {
    forLimit(limit: LimitSpec): Limiter {
      if (algo !== 'drl') return storeLimiter;
      const perGateway = limit.per > 0 ? limit.rate / limit.per : Infinity;
      return perGateway > o.drl_threshold * Math.max(1, d.peers()) ? drl : storeLimiter;
    },
    quota,
    all: [drl, storeLimiter],
  };
}
