/**
 * Picks the algorithm for a limit (docs/contract.md#algorithms). One store algorithm for the whole gateway from the
 * options (selectedAlgorithm); with the default DRL, the drl_threshold switch: DRL when
 * rate / per > drl_threshold × N, else the sliding window log (Redis, or memory with no store). The DRL
 * leases from the store's counter (or the memory one with no store).
 * Evaluated on every check, so a change of N moves limits at once. Store errors follow kv_failure_mode.
 */
import type { Clock } from '../lib/clock.js';
import { selectedAlgorithm, type Algorithm, type GatewayOptionsT } from '../lib/options.js';
import type { StoreClient } from '../lib/store/redis.js';
import type { LimitSpec } from '../contract/config.js';
import { DrlLimiter, type PeerCount } from './drl.js';
import { MemoryLeaseCounter, RedisLeaseCounter } from './drl-counter.js';
import { DEFAULT_STORE_DEADLINE_MS, StoreCalls, storeReady } from '../lib/store/store-calls.js';
import { WithFailureMode } from './failure-mode.js';
import { MemoryFixedWindow, RedisFixedWindow } from './fixed-window.js';
import { MemoryQuota, RedisQuota, type QuotaStore } from './quota.js';
import { MemorySentinel, RedisSentinel } from './sentinel.js';
import { MemorySlidingLog, RedisSlidingLog } from './sliding-log.js';
import type { Limiter, SmoothingListener } from './types.js';

export interface LimiterDeps {
  options: GatewayOptionsT;
  clock: Clock;
  /** The shared store; absent = memory. */
  redis?: StoreClient;
  /** Live gateways of the group (DRL); 1 with no store. */
  peers: PeerCount;
  onSmoothing?: SmoothingListener;
  onStoreError?: (e: Error) => void;
  /** A bucket whose store keys held another type (bad store content) was removed to start afresh. */
  onStoreRepair?: (bucket: string) => void;
  /** Deadline of one store call on the request path (ms, default options.kv_deadline_ms). */
  storeDeadlineMs?: number;
  /** The DRL lost the store (true: even split over the last known peers) or has it back (false). */
  onDrlFallback?: (active: boolean, e?: Error) => void;
}

export interface Limiters {
  /** The gateway's algorithm from the options. */
  readonly algorithm: Algorithm;
  /** The limiter a limit uses right now. */
  forLimit(limit: LimitSpec): Limiter;
  /** The store-backed limiter (sliding log, sentinel or fixed window), wrapped in kv_failure_mode. */
  readonly store: Limiter;
  readonly drl: DrlLimiter;
  readonly quota: QuotaStore;
  /** How store calls on the request path are made (connection check, deadline, error report); shared by the limiters and the quota. */
  readonly storeCalls: StoreCalls;
  /** Whether a limit's smoothing can take effect with the limiter that counts it now. */
  canSmooth(limiter: Limiter): boolean;
  /** Resolves when background store writes (sentinel log) have finished. */
  settled(): Promise<void>;
}

/** drl_threshold (docs/contract.md#algorithms): a limit faster than drl_threshold req/s per gateway goes to the DRL. */
export function usesDrl(limit: LimitSpec, drlThreshold: number, peers: number): boolean {
  const perSecond = limit.per > 0 ? limit.rate / limit.per : Infinity;
  return perSecond > drlThreshold * Math.max(1, peers);
}

export function createLimiters(d: LimiterDeps): Limiters {
  const o = d.options;
  const onError = d.onStoreError ?? (() => {});
  const smoothing = o.enable_rate_limit_smoothing;
  const algorithm = selectedAlgorithm(o);
  const calls = d.redis
    ? new StoreCalls(d.storeDeadlineMs ?? DEFAULT_STORE_DEADLINE_MS, storeReady(d.redis), onError)
    : new StoreCalls(0, undefined, onError);
  const drl = new DrlLimiter({
    clock: d.clock,
    counter: d.redis ? new RedisLeaseCounter(d.redis) : new MemoryLeaseCounter(d.clock),
    peers: d.peers,
    calls: d.redis ? calls : undefined,
    onFallback: d.onDrlFallback,
  });
  let inner: Limiter;
  let sentinel: RedisSentinel | undefined;
  if (algorithm === 'fixed_window')
    inner = d.redis ? new RedisFixedWindow(d.redis, d.clock) : new MemoryFixedWindow(d.clock);
  else if (algorithm === 'sentinel') {
    inner = d.redis
      ? (sentinel = new RedisSentinel(d.redis, d.clock, { smoothingEnabled: smoothing }, d.onSmoothing, onError))
      : new MemorySentinel(d.clock, d.onSmoothing, smoothing);
  } else {
    inner = d.redis
      ? new RedisSlidingLog(
          d.redis,
          d.clock,
          { transactional: !o.enable_non_transactional_rate_limiter, smoothingEnabled: smoothing },
          d.onSmoothing,
        )
      : new MemorySlidingLog(d.clock, d.onSmoothing, smoothing);
  }
  const store = d.redis ? new WithFailureMode(inner, o.kv_failure_mode, d.clock, calls, d.onStoreRepair) : inner;
  const quota: QuotaStore = d.redis ? new RedisQuota(d.redis, d.clock) : new MemoryQuota(d.clock);

  return {
    algorithm,
    store,
    drl,
    quota,
    storeCalls: calls,
    canSmooth: (limiter) => limiter !== drl && algorithm !== 'fixed_window',
    forLimit(limit: LimitSpec): Limiter {
      if (algorithm !== 'drl') return store;
      return usesDrl(limit, o.drl_threshold, d.peers()) ? drl : store;
    },
    async settled() {
      await sentinel?.settled();
    },
  };
}
