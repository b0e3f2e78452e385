/**
 * Quotas (SPEC.md §3.5): exactly quota_max requests per quota_renewal_rate seconds (≤ 0: never renews);
 * quota_max ≤ 0 is unlimited. The period starts with the first request after a reset.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';

export interface QuotaSpec {
  max: number;
  renewal: number; // seconds
}

export interface QuotaResult {
  allowed: boolean;
  max: number;
  remaining: number;
  /** Unix seconds of the next renewal (0 = never). */
  renews: number;
}

export interface QuotaStore {
  consume(bucket: string, q: QuotaSpec): Promise<QuotaResult>;
  read(bucket: string, q: QuotaSpec): Promise<{ remaining: number; renews: number }>;
  reset(bucket: string): Promise<void>;
}

export class MemoryQuota implements QuotaStore {
  private readonly state = new Map<string, { used: number; renews: number }>();
  constructor(private readonly clock: Clock) {}

  private current(bucket: string, q: QuotaSpec, now: number): { used: number; renews: number } {
    let s = this.state.get(bucket);
    if (!s || (s.renews > 0 && now >= s.renews)) {
      s = { used: 0, renews: q.renewal > 0 ? now + q.renewal * 1000 : 0 };
      this.state.set(bucket, s);
    }
    return s;
  }

  async consume(bucket: string, q: QuotaSpec): Promise<QuotaResult> {
    const now = this.clock.now();
    const s = this.current(bucket, q, now);
    const allowed = s.used < q.max;
    if (allowed) s.used++;
    return { allowed, max: q.max, remaining: Math.max(0, q.max - s.used), renews: Math.ceil(s.renews / 1000) };
  }

  async read(bucket: string, q: QuotaSpec): Promise<{ remaining: number; renews: number }> {
    const s = this.state.get(bucket);
    const now = this.clock.now();
    if (!s || (s.renews > 0 && now >= s.renews)) return { remaining: q.max, renews: 0 };
    return { remaining: Math.max(0, q.max - s.used), renews: Math.ceil(s.renews / 1000) };
  }

  async reset(bucket: string): Promise<void> {
    this.state.delete(bucket);
  }
}

const CONSUME = `
local now = tonumber(ARGV[1]); local max = tonumber(ARGV[2]); local renewal = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'used', 'renews')
local used = tonumber(s[1]); local renews = tonumber(s[2])
if used == nil or (renews > 0 and now >= renews) then
  used = 0
  if renewal > 0 then renews = now + renewal else renews = 0 end
end
local allowed = 0
if used < max then used = used + 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'used', used, 'renews', renews)
if renews > 0 then redis.call('PEXPIREAT', KEYS[1], renews + 1000) end
return {allowed, used, renews}
`;

type QuotaClient = (Redis | Cluster) & { gwQuota(key: string, ...args: (string | number)[]): Promise<[number, number, number]> };

export function quotaKey(bucket: string): string {
  return `gw:{${bucket}}:quota`;
}

export class RedisQuota implements QuotaStore {
  private readonly redis: QuotaClient;
  constructor(
    redis: Redis | Cluster,
    private readonly clock: Clock,
  ) {
    this.redis = redis as QuotaClient;
    if (typeof this.redis.gwQuota !== 'function') redis.defineCommand('gwQuota', { numberOfKeys: 1, lua: CONSUME });
  }

  async consume(bucket: string, q: QuotaSpec): Promise<QuotaResult> {
    const [allowed, used, renews] = await this.redis.gwQuota(quotaKey(bucket), this.clock.now(), q.max, Math.round(q.renewal * 1000));
    return { allowed: allowed === 1, max: q.max, remaining: Math.max(0, q.max - used), renews: Math.ceil(renews / 1000) };
  }

  async read(bucket: string, q: QuotaSpec): Promise<{ remaining: number; renews: number }> {
    const [used, renews] = await this.redis.hmget(quotaKey(bucket), 'used', 'renews');
    const now = this.clock.now();
    if (used === null || (Number(renews) > 0 && now >= Number(renews))) return { remaining: q.max, renews: 0 };
    return { remaining: Math.max(0, q.max - Number(used)), renews: Math.ceil(Number(renews) / 1000) };
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(quotaKey(bucket));
  }
}
