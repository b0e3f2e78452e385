/**
 * Quotas (docs/contract.md#quotas): exactly quota_max requests per quota_renewal_rate seconds (≤ 0: never
 * renews); quota_max ≤ 0 is unlimited (the engine never asks). The period starts with the first request
 * after a reset or a renewal. Memory: exact. Redis: one Lua script per request, atomic across gateways.
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import type { StoreClient } from '../lib/store/redis.js';
import { defineScript, luaScript, type ScriptRunner } from '../lib/store/scripts.js';
import { storeKeys } from '../contract/store-keys.js';
import type { MaybePromise } from './types.js';
import type { QuotaSpec } from '../contract/config.js';

export type { QuotaSpec };

export interface QuotaResult {
  allowed: boolean;
  max: number;
  remaining: number;
  /** Unix seconds of the next renewal (0 = never). */
  renews: number;
  /** The renewal in clock ms (0 = never): Retry-After is counted from it, not from the rounded seconds. */
  renewsMs?: number;
  /** Refused because the quota's store is unreachable (kv_failure_mode closed): a 503, not a quota refusal. */
  unavailable?: true;
}

export interface QuotaState {
  remaining: number;
  /** Unix seconds of the next renewal (0 = never, or no period running). */
  renews: number;
}

export interface QuotaStore {
  /** Synchronous in memory, a promise from the store. */
  consume(bucket: string, q: QuotaSpec): MaybePromise<QuotaResult>;
  read(bucket: string, q: QuotaSpec): Promise<QuotaState>;
  reset(bucket: string): Promise<void>;
}

const toSeconds = (ms: number): number => (ms > 0 ? Math.ceil(ms / 1000) : 0);

function view(max: number, used: number | undefined, renewsMs: number, now: number): QuotaState {
  if (used === undefined || (renewsMs > 0 && now >= renewsMs)) return { remaining: max, renews: 0 };
  return { remaining: Math.max(0, max - used), renews: toSeconds(renewsMs) };
}

export class MemoryQuota implements QuotaStore {
  private readonly state: ExpiringMap<{ used: number; renews: number }>;
  constructor(private readonly clock: Clock) {
    this.state = new ExpiringMap(clock);
  }

  consume(bucket: string, q: QuotaSpec): QuotaResult {
    const now = this.clock.now();
    let s = this.state.get(bucket, now);
    if (!s) {
      const renews = q.renewal > 0 ? now + q.renewal * 1000 : 0;
      this.state.set(bucket, (s = { used: 0, renews }), renews > 0 ? renews : Infinity);
    }
    const allowed = s.used < q.max;
    if (allowed) s.used++;
    return {
      allowed,
      max: q.max,
      remaining: Math.max(0, q.max - s.used),
      renews: toSeconds(s.renews),
      renewsMs: s.renews,
    };
  }

  async read(bucket: string, q: QuotaSpec): Promise<QuotaState> {
    const s = this.state.get(bucket);
    return view(q.max, s?.used, s?.renews ?? 0, this.clock.now());
  }

  async reset(bucket: string): Promise<void> {
    this.state.delete(bucket);
  }

  /** Every running period, to persist across a restart (standalone without Redis: quota-state.ts). */
  snapshot(): QuotaPeriod[] {
    return this.state.entries().map(([bucket, s]) => ({ bucket, used: s.used, renews: s.renews }));
  }

  /** Periods of a snapshot; ones that have renewed meanwhile are dropped (the next request starts afresh). */
  restore(periods: QuotaPeriod[]): void {
    const now = this.clock.now();
    for (const p of periods) {
      if (p.renews > 0 && p.renews <= now) continue;
      this.state.set(p.bucket, { used: p.used, renews: p.renews }, p.renews > 0 ? p.renews : Infinity);
    }
  }
}

/** One bucket's running quota period: requests used, renewal in clock ms (0 = never). */
export interface QuotaPeriod {
  bucket: string;
  used: number;
  renews: number;
}

/** quota-consume.lua. KEYS: quota hash. ARGV: now ms, max, renewal ms. Returns {allowed, used, renews ms}. */
const CONSUME = luaScript(import.meta.url, 'quota-consume.lua');

export class RedisQuota implements QuotaStore {
  private readonly run: ScriptRunner<[number, number, string]>;
  constructor(
    private readonly redis: StoreClient,
    private readonly clock: Clock,
  ) {
    this.run = defineScript(redis, 'gwQuota', 1, CONSUME);
  }

  async consume(bucket: string, q: QuotaSpec): Promise<QuotaResult> {
    const [allowed, used, renews] = await this.run(
      [storeKeys.quota(bucket)],
      [this.clock.now(), q.max, Math.round(q.renewal * 1000)],
    );
    const renewsMs = Number(renews);
    return {
      allowed: allowed === 1,
      max: q.max,
      remaining: Math.max(0, q.max - used),
      renews: toSeconds(renewsMs),
      renewsMs,
    };
  }

  async read(bucket: string, q: QuotaSpec): Promise<QuotaState> {
    const [used, renews] = await this.redis.hmget(storeKeys.quota(bucket), 'used', 'renews');
    return view(q.max, used === null ? undefined : Number(used), Number(renews ?? 0), this.clock.now());
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(storeKeys.quota(bucket));
  }
}
