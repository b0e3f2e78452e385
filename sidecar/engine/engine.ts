/**
 * The limiter engine (SPEC.md §3.1 steps 2–4): API scope, then key scope, then quota.
 *   API scope: the first matching per-endpoint rule, else the API's global limit. A refusal here
 *     consumes no key allowance and no quota.
 *   Key scope: the most specific limit of the key — per-endpoint → per-API → global — one check,
 *     throttled retries, then refusal. The global bucket is shared by every API of the key; per-API and
 *     per-endpoint buckets are the key's own per API / endpoint.
 *   Quota: per-API quota when the access definition sets quota_max, else the key's.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';
import type { GatewayOptionsT } from '../../lib/options.js';
import type { StoredSession } from '../../lib/sessions.js';
import type { CompiledConfig, LimitSpec } from '../config/types.js';
import { createLimiters, type Limiters } from '../limiters/select.js';
import type { LimitResult, SmoothingEvent } from '../limiters/types.js';
import type { QuotaResult, QuotaSpec } from '../limiters/quota.js';
import { effectiveSession, type EffectiveSession } from './effective-session.js';
import { matchApiRule, matchKeyEndpoint } from './endpoint-match.js';
import { limiterIdentity } from './rate-limit-key.js';
import { Throttle, type Sleep } from './throttle.js';
import type { CheckRequest, Engine, HeaderNumbers, Verdict } from './types.js';

export interface EngineDeps {
  options: GatewayOptionsT;
  clock: Clock;
  config: () => CompiledConfig;
  redis?: Redis | Cluster;
  /** Live gateways of the DRL group (default 1). */
  peers?: () => number;
  onSmoothingEvent?: (e: SmoothingEvent & { api_id: string }) => void;
  onSmoothingAllowance?: (api_id: string, allowance: number) => void;
  onStoreError?: (e: Error) => void;
  sleep?: Sleep;
}

export interface GatewayEngine extends Engine {
  limiters: Limiters;
  /** Quota counters of a key back to full (a key added without suppress_reset). */
  resetQuota(keyHash: string, stored?: StoredSession): Promise<void>;
  /** Live quota of a key, or undefined when it has no quota. */
  readQuota(keyHash: string, stored: StoredSession): Promise<{ remaining: number; renews: number } | undefined>;
}

function enabled(l: { rate?: number; per?: number } | null | undefined): l is { rate: number; per: number } {
  return !!l && l.rate !== undefined && l.per !== undefined && !(l.rate === 0 && l.per === 0);
}

function headersOf(r: LimitResult): HeaderNumbers {
  return { limit: r.limit, remaining: r.remaining, reset: r.reset };
}

interface KeyLimit {
  bucket: string;
  limit: LimitSpec;
}

export function createEngine(d: EngineDeps): GatewayEngine {
  const o = d.options;
  const bucketApi = new Map<string, string>();
  const limiters = createLimiters({
    options: o,
    clock: d.clock,
    redis: d.redis,
    peers: d.peers ?? (() => 1),
    onStoreError: d.onStoreError,
    onSmoothing: (e, allowance) => {
      const api_id = bucketApi.get(e.limiterKey) ?? '';
      d.onSmoothingEvent?.({ ...e, api_id });
      d.onSmoothingAllowance?.(api_id, allowance);
    },
  });
  const throttle = new Throttle(o.max_throttled_requests, d.sleep);

  const check = (bucket: string, limit: LimitSpec, apiId: string): Promise<LimitResult> => {
    if (limit.smoothing) {
      if (bucketApi.size > 100_000) bucketApi.clear();
      bucketApi.set(bucket, apiId);
    }
    return limiters.forLimit(limit).check(bucket, limit);
  };

  function keyLimit(eff: EffectiveSession, identity: string, apiId: string, method: string, path: string): KeyLimit | undefined {
    const def = eff.access_rights[apiId];
    const ep = matchKeyEndpoint(def, method, path);
    if (ep && enabled(ep.limit)) return { bucket: `k:${identity}:a:${apiId}:e:${ep.id}`, limit: ep.limit };
    const apiLimit = def?.limit;
    if (apiLimit && enabled(apiLimit)) {
      return { bucket: `k:${identity}:a:${apiId}`, limit: { rate: apiLimit.rate, per: apiLimit.per, smoothing: def.limit?.smoothing } };
    }
    if (enabled(eff)) return { bucket: `k:${identity}`, limit: { rate: eff.rate, per: eff.per, smoothing: eff.smoothing } };
    return undefined;
  }

  function quotaOf(eff: EffectiveSession, identity: string, apiId: string): { bucket: string; spec: QuotaSpec } | undefined {
    const l = eff.access_rights[apiId]?.limit;
    if (l?.quota_max !== undefined) {
      return l.quota_max > 0 ? { bucket: `q:${identity}:a:${apiId}`, spec: { max: l.quota_max, renewal: l.quota_renewal_rate ?? 0 } } : undefined;
    }
    if (eff.quota_max !== undefined && eff.quota_max > 0) {
      return { bucket: `q:${identity}`, spec: { max: eff.quota_max, renewal: eff.quota_renewal_rate ?? 0 } };
    }
    return undefined;
  }

  async function consumeQuota(bucket: string, spec: QuotaSpec): Promise<QuotaResult> {
    try {
      return await limiters.quota.consume(bucket, spec);
    } catch (e) {
      d.onStoreError?.(e as Error);
      return { allowed: o.kv_failure_mode === 'open', max: spec.max, remaining: 0, renews: 0 };
    }
  }

  function identityOf(keyHash: string, stored: StoredSession, config: CompiledConfig): { eff: EffectiveSession; identity: string } | undefined {
    const eff = effectiveSession(stored, config);
    if (eff instanceof Error) return undefined;
    return { eff, identity: limiterIdentity(keyHash, eff.rate_limit_pattern, eff.meta_data) };
  }

  return {
    limiters,

    async check(req: CheckRequest): Promise<Verdict> {
      const { api, method, path } = req;
      const config = d.config();
      // 2. API scope
      let apiResult: LimitResult | undefined;
      const rule = matchApiRule(api, method, path);
      const apiBase = `a:${api.namespace}/${api.api_id}`;
      if (rule) apiResult = await check(`${apiBase}:e:${rule.id}`, { rate: rule.rate, per: rule.per }, api.api_id);
      else if (api.apiLimit) apiResult = await check(apiBase, api.apiLimit, api.api_id);
      if (apiResult && !apiResult.allowed) {
        return { kind: 'api_limited', headers: o.rate_limit_response_headers === 'rate_limits' ? headersOf(apiResult) : undefined, retryAfter: apiResult.retryAfter };
      }
      if (api.keyless || !req.session || !req.keyHash) {
        return { kind: 'allow', headers: apiResult && o.rate_limit_response_headers === 'rate_limits' ? headersOf(apiResult) : undefined };
      }

      // 3. key scope
      const who = identityOf(req.keyHash, req.session, config);
      if (!who) return { kind: 'key_limited', retryAfter: 1 }; // unreachable: the proxy refuses such keys first
      const { eff, identity } = who;
      const kl = keyLimit(eff, identity, api.api_id, method, path);
      let keyResult: LimitResult | undefined;
      if (kl) {
        keyResult = await check(kl.bucket, kl.limit, api.api_id);
        const retries = eff.throttle_retry_limit ?? 0;
        const interval = eff.throttle_interval ?? 0;
        if (!keyResult.allowed && retries > 0 && interval > 0) {
          keyResult = await throttle.retry(keyResult, interval, retries, () => check(kl.bucket, kl.limit, api.api_id));
        }
      }
      const rlHeaders = (): HeaderNumbers | undefined => {
        if (o.rate_limit_response_headers !== 'rate_limits') return undefined;
        if (keyResult && apiResult) return headersOf(apiResult.remaining < keyResult.remaining ? apiResult : keyResult);
        const r = keyResult ?? apiResult;
        return r && headersOf(r);
      };
      if (keyResult && !keyResult.allowed) return { kind: 'key_limited', headers: rlHeaders(), retryAfter: keyResult.retryAfter };

      // 4. quota
      const q = quotaOf(eff, identity, api.api_id);
      if (!q) return { kind: 'allow', headers: rlHeaders() };
      const qr = await consumeQuota(q.bucket, q.spec);
      const headers = o.rate_limit_response_headers === 'quotas' ? { limit: qr.max, remaining: qr.remaining, reset: qr.renews } : rlHeaders();
      if (!qr.allowed) {
        const now = Math.floor(d.clock.now() / 1000);
        const retryAfter = qr.renews > 0 ? Math.max(1, qr.renews - now) : Math.max(1, q.spec.renewal);
        return { kind: 'quota_exceeded', headers, retryAfter };
      }
      return { kind: 'allow', headers };
    },

    async resetQuota(keyHash: string, stored?: StoredSession): Promise<void> {
      const config = d.config();
      const who = stored ? identityOf(keyHash, stored, config) : undefined;
      const identity = who?.identity ?? `h:${keyHash}`;
      const buckets = [`q:${identity}`, ...Object.keys(who?.eff.access_rights ?? {}).map((a) => `q:${identity}:a:${a}`)];
      for (const b of buckets) await limiters.quota.reset(b);
    },

    async readQuota(keyHash: string, stored: StoredSession) {
      const who = identityOf(keyHash, stored, d.config());
      if (!who) return undefined;
      const { eff, identity } = who;
      if (eff.quota_max === undefined || eff.quota_max <= 0) return undefined;
      return limiters.quota.read(`q:${identity}`, { max: eff.quota_max, renewal: eff.quota_renewal_rate ?? 0 });
    },
  };
}
