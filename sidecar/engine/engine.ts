/**
 * The limiter engine (SPEC.md §3.1 steps 2–4): API scope, then key scope, then quota.
 *   API scope: the first matching per-endpoint rule, else the API's global limit (absent when
 *     disabled). A refusal here consumes no key allowance and no quota.
 *   Key scope: the most specific limit of the key (key-limits.ts), one check, throttled retries
 *     (throttle.ts), then refusal.
 *   Quota: per-API quota when the access definition sets quota_max, else the key's.
 * Headers (§3.7): `rate_limits` → the checked limit; with both scopes checked, the one with fewer
 * requests remaining (the key's on a tie). `quotas` → quota_max, quota_remaining, quota_renews.
 */
import type { Clock } from '../../lib/clock.js';
import type { GatewayOptionsT } from '../../lib/options.js';
import type { StoredSession } from '../../lib/sessions.js';
import type { StoreClient } from '../../lib/store/redis.js';
import type { CompiledConfig, LimitSpec } from '../config/types.js';
import type { PeerCount } from '../limiters/drl.js';
import { asError, withDeadline } from '../limiters/failure-mode.js';
import { smoothingActive } from '../limiters/smoothing.js';
import type { QuotaResult, QuotaSpec, QuotaState } from '../limiters/quota.js';
import { createLimiters, type Limiters } from '../limiters/select.js';
import type { LimitResult, SmoothingEvent } from '../limiters/types.js';
import { effectiveSession, type EffectiveSession } from './effective-session.js';
import { matchApiRule } from './endpoint-match.js';
import { keyLimitFor, keyQuota, quotaBuckets, quotaFor } from './key-limits.js';
import { limiterIdentity } from './rate-limit-key.js';
import { Throttle, type Sleep } from './throttle.js';
import type { CheckRequest, Engine, HeaderNumbers, Verdict } from './types.js';

export type EngineSmoothingEvent = SmoothingEvent & { api_id: string };

export interface EngineDeps {
  options: GatewayOptionsT;
  clock: Clock;
  config: () => CompiledConfig;
  /** The shared store; absent = every limit in memory (standalone). */
  redis?: StoreClient;
  /** Alias of `redis`. */
  store?: StoreClient;
  /** Live gateways of the DRL group (default 1). */
  peers?: PeerCount;
  onSmoothingEvent?: (e: EngineSmoothingEvent) => void;
  onSmoothingAllowance?: (api_id: string, allowance: number) => void;
  /** Every store error (the request then follows kv_failure_mode). */
  onStoreError?: (e: Error) => void;
  /** Throttling's wait; a timer by default. */
  sleep?: Sleep;
  /** Deadline of one store call on the request path (ms; default options.kv_deadline_ms = 50); over it kv_failure_mode decides. */
  storeDeadlineMs?: number;
  /**
   * A limit configures smoothing but the limiter that counts it cannot smooth (fixed window, or the DRL
   * for a limit above drl_threshold): the smoothing is refused (the plain rate applies) and reported
   * here once per bucket, so the operator sees it in the logs and metrics.
   */
  onSmoothingUnsupported?: (e: SmoothingUnsupported) => void;
}

export interface SmoothingUnsupported {
  api_id: string;
  /** The limiter bucket (never a raw key). */
  limiterKey: string;
  algorithm: string;
  reason: string;
}

export interface GatewayEngine extends Engine {
  readonly limiters: Limiters;
  /** Quota counters of a key back to full (a key added without suppress_reset). */
  resetQuota(keyHash: string, stored?: StoredSession): Promise<void>;
  /** Live quota of a key (the per-API one with apiId when it has one), or undefined without a quota. */
  readQuota(keyHash: string, stored: StoredSession, apiId?: string): Promise<(QuotaState & { max: number }) | undefined>;
  /** The identity limits and quotas of a key count against (custom rate-limit key or key hash). */
  identityOf(keyHash: string, stored: StoredSession): string | Error;
}

const headersOf = (r: LimitResult): HeaderNumbers => ({ limit: r.limit, remaining: r.remaining, reset: r.reset });

export function createEngine(d: EngineDeps): GatewayEngine {
  const o = d.options;
  const redis = d.redis ?? d.store;
  const bucketApi = new Map<string, string>();
  const limiters = createLimiters({
    options: o,
    clock: d.clock,
    redis,
    peers: d.peers ?? (() => 1),
    onStoreError: d.onStoreError,
    storeDeadlineMs: d.storeDeadlineMs ?? o.kv_deadline_ms,
    onSmoothing: (e, allowance) => {
      const api_id = bucketApi.get(e.limiterKey) ?? '';
      d.onSmoothingEvent?.({ ...e, api_id });
      d.onSmoothingAllowance?.(api_id, allowance);
    },
  });
  const throttle = new Throttle(o.max_throttled_requests, d.sleep);
  const rateHeaders = o.rate_limit_response_headers === 'rate_limits';

  const smoothingOn = o.enable_rate_limit_smoothing;
  const reportedUnsupported = new Set<string>();
  const check = (bucket: string, limit: LimitSpec, apiId: string): Promise<LimitResult> => {
    const limiter = limiters.forLimit(limit);
    if (limit.smoothing && smoothingOn && smoothingActive(limit.smoothing)) {
      if (limiters.canSmooth(limiter)) {
        if (bucketApi.size > 100_000) bucketApi.clear();
        bucketApi.set(bucket, apiId);
      } else if (!reportedUnsupported.has(bucket)) {
        if (reportedUnsupported.size > 10_000) reportedUnsupported.clear();
        reportedUnsupported.add(bucket);
        d.onSmoothingUnsupported?.({
          api_id: apiId,
          limiterKey: bucket,
          algorithm: limiter.name,
          reason: `smoothing refused: the ${limiter.name} limiter cannot smooth (only the sliding window log and the sentinel variant can); the plain rate applies`,
        });
      }
    }
    return limiter.check(bucket, limit);
  };

  async function consumeQuota(bucket: string, spec: QuotaSpec): Promise<QuotaResult> {
    try {
      return await withDeadline(limiters.quota.consume(bucket, spec), limiters.storeDeadlineMs);
    } catch (e) {
      d.onStoreError?.(asError(e));
      return { allowed: o.kv_failure_mode === 'open', max: spec.max, remaining: 0, renews: 0 };
    }
  }

  /** Headers of the checked limit(s): with both scopes, the one with fewer requests remaining (the key's on a tie). */
  function rlHeaders(apiResult: LimitResult | undefined, keyResult: LimitResult | undefined): HeaderNumbers | undefined {
    if (!rateHeaders) return undefined;
    if (keyResult && apiResult) return headersOf(apiResult.remaining < keyResult.remaining ? apiResult : keyResult);
    const r = keyResult ?? apiResult;
    return r && headersOf(r);
  }

  // the identity is a function of the key hash and the (cached, never mutated) effective session: kept
  // with the latter so the identity string is not built on every request
  const identities = new WeakMap<EffectiveSession, { keyHash: string; eff: EffectiveSession; identity: string }>();
  function who(keyHash: string, stored: StoredSession): { eff: EffectiveSession; identity: string } | Error {
    const eff = effectiveSession(stored, d.config());
    if (eff instanceof Error) return eff;
    const hit = identities.get(eff);
    if (hit !== undefined && hit.keyHash === keyHash) return hit;
    const w = { keyHash, eff, identity: limiterIdentity(keyHash, eff.rate_limit_pattern, eff.meta_data) };
    identities.set(eff, w);
    return w;
  }

  return {
    limiters,

    async check(req: CheckRequest): Promise<Verdict> {
      const { api, method, path } = req;
      // 2. API scope
      let apiResult: LimitResult | undefined;
      const rule = matchApiRule(api, method, path);
      // bucket names built only when the API has a limit (most APIs with keys have none)
      if (rule) apiResult = await check(`a:${api.namespace}/${api.api_id}:e:${rule.id}`, { rate: rule.rate, per: rule.per }, api.api_id);
      else if (api.apiLimit) apiResult = await check(`a:${api.namespace}/${api.api_id}`, api.apiLimit, api.api_id);
      if (apiResult && !apiResult.allowed) {
        return { kind: 'api_limited', headers: rateHeaders ? headersOf(apiResult) : undefined, retryAfter: apiResult.retryAfter };
      }
      if (api.keyless || !req.session || req.keyHash === undefined) {
        return { kind: 'allow', headers: apiResult && rateHeaders ? headersOf(apiResult) : undefined };
      }

      // 3. key scope. A key whose policies are missing or inactive is refused before it gets here
      // (the proxy asks effectiveSession for its access rights); should one arrive, it is refused.
      const w = who(req.keyHash, req.session);
      if (w instanceof Error) return { kind: 'key_limited', retryAfter: 1 };
      const { eff, identity } = w;
      const kl = keyLimitFor(eff, identity, api.api_id, method, path);
      let keyResult: LimitResult | undefined;
      if (kl) {
        keyResult = await check(kl.bucket, kl.limit, api.api_id);
        const retries = eff.throttle_retry_limit ?? 0;
        if (!keyResult.allowed && retries > 0) {
          keyResult = await throttle.retry(keyResult, eff.throttle_interval ?? 0, retries, () => check(kl.bucket, kl.limit, api.api_id));
        }
      }
      if (keyResult && !keyResult.allowed) return { kind: 'key_limited', headers: rlHeaders(apiResult, keyResult), retryAfter: keyResult.retryAfter };

      // 4. quota
      const q = quotaFor(eff, identity, api.api_id);
      if (!q) return { kind: 'allow', headers: rlHeaders(apiResult, keyResult) };
      const qr = await consumeQuota(q.bucket, q.spec);
      const headers = rateHeaders ? rlHeaders(apiResult, keyResult) : { limit: qr.max, remaining: qr.remaining, reset: qr.renews };
      if (!qr.allowed) {
        const now = Math.floor(d.clock.now() / 1000);
        return { kind: 'quota_exceeded', headers, retryAfter: qr.renews > 0 ? Math.max(1, qr.renews - now) : Math.max(1, q.spec.renewal) };
      }
      return { kind: 'allow', headers };
    },

    async resetQuota(keyHash: string, stored?: StoredSession): Promise<void> {
      const w = stored ? who(keyHash, stored) : undefined;
      const ok = w && !(w instanceof Error) ? w : undefined;
      for (const b of quotaBuckets(ok?.eff, ok?.identity ?? `h:${keyHash}`)) await limiters.quota.reset(b);
    },

    async readQuota(keyHash: string, stored: StoredSession, apiId?: string) {
      const w = who(keyHash, stored);
      if (w instanceof Error) return undefined;
      const q = apiId !== undefined ? quotaFor(w.eff, w.identity, apiId) : keyQuota(w.eff, w.identity);
      if (!q) return undefined;
      return { max: q.spec.max, ...(await limiters.quota.read(q.bucket, q.spec)) };
    },

    identityOf(keyHash: string, stored: StoredSession): string | Error {
      const w = who(keyHash, stored);
      return w instanceof Error ? w : w.identity;
    },
  };
}
