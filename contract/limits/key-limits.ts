/**
 * Which key-level limit and which quota a request is counted against, and under which bucket names.
 *   limit: per-endpoint (access_rights[api].endpoints) → per-API (access_rights[api].limit with rate
 *     and per) → the key's global rate/per. A limit with rate and per both 0 is disabled and skipped.
 *     Buckets: global `k:<id>` (shared by every API of the key), per-API `k:<id>:a:<api>`, per-endpoint
 *     `k:<id>:a:<api>:e:<METHOD path>` (independent per key, API and endpoint).
 *   quota: the per-API quota when access_rights[api].limit sets quota_max, else the key's; ≤ 0 = none.
 * `<id>` is the limiter identity (rate-limit-key.ts).
 */
import type { LimitSpec } from '../config.js';
import type { QuotaSpec } from '../config.js';
import type { CompiledConfig } from '../config.js';
import type { StoredSession } from '../sessions.js';
import { effectiveSession, type EffectiveSession } from './effective-session.js';
import { limiterIdentity } from './rate-limit-key.js';
import { matchKeyEndpoint } from './endpoint-match.js';

export interface KeyLimit {
  bucket: string;
  limit: LimitSpec;
  scope: 'endpoint' | 'api' | 'global';
  /** The policy whose limit this is (its smoothing events go on it); undefined: the key's own limit. */
  policy?: string;
  /** Throttling of a refusal (docs/contract.md#throttling): the per-API limit's fields for a per-API or per-endpoint limit when it sets them, else the key's; ≤ 0 retries = none. */
  throttle: { interval: number; retries: number };
}

/** A rate limit is in force when rate and per are given and not both 0. */
export function enabled(l: { rate?: number; per?: number } | null | undefined): l is { rate: number; per: number } {
  return !!l && l.rate !== undefined && l.per !== undefined && !(l.rate === 0 && l.per === 0);
}

/**
 * Per effective session (itself cached per stored session and config) and API: the key limit when it does
 * not depend on the request (no per-endpoint limits), so its bucket name and limit are built once per key
 * rather than on every request. Effective sessions are never mutated.
 */
const limitCache = new WeakMap<EffectiveSession, Map<string, { identity: string; kl: KeyLimit | undefined }>>();

export function keyLimitFor(
  eff: EffectiveSession,
  identity: string,
  apiId: string,
  method: string,
  path: string,
  caseless = false,
): KeyLimit | undefined {
  const def = eff.access_rights[apiId];
  if (def?.endpoints?.length) return computeKeyLimit(eff, identity, apiId, method, path, caseless);
  let byApi = limitCache.get(eff);
  if (!byApi) limitCache.set(eff, (byApi = new Map()));
  const hit = byApi.get(apiId);
  if (hit !== undefined && hit.identity === identity) return hit.kl;
  const kl = computeKeyLimit(eff, identity, apiId, method, path);
  if (byApi.size >= 1000) byApi.clear();
  byApi.set(apiId, { identity, kl });
  return kl;
}

function computeKeyLimit(
  eff: EffectiveSession,
  identity: string,
  apiId: string,
  method: string,
  path: string,
  caseless = false,
): KeyLimit | undefined {
  const def = eff.access_rights[apiId];
  const keyThrottle = { interval: eff.throttle_interval ?? 0, retries: eff.throttle_retry_limit ?? 0 };
  const apiLimit = def?.limit;
  const apiThrottle =
    apiLimit?.throttle_retry_limit !== undefined
      ? { interval: apiLimit.throttle_interval ?? 0, retries: apiLimit.throttle_retry_limit }
      : keyThrottle;
  const ep = matchKeyEndpoint(def, method, path, caseless);
  if (ep && enabled(ep.limit))
    return { bucket: `k:${identity}:a:${apiId}:e:${ep.id}`, limit: ep.limit, scope: 'endpoint', throttle: apiThrottle };
  if (enabled(apiLimit)) {
    const limit = { rate: apiLimit.rate, per: apiLimit.per, smoothing: def?.limit?.smoothing };
    return {
      bucket: `k:${identity}:a:${apiId}`,
      limit,
      scope: 'api',
      throttle: apiThrottle,
      policy: eff.limit_policy?.apis[apiId],
    };
  }
  if (enabled(eff)) {
    const limit = { rate: eff.rate, per: eff.per, smoothing: eff.smoothing };
    return { bucket: `k:${identity}`, limit, scope: 'global', throttle: keyThrottle, policy: eff.limit_policy?.global };
  }
  return undefined;
}

export type QuotaRef = { bucket: string; spec: QuotaSpec };

/** The key's own (global) quota, when it has one. */
export function keyQuota(eff: EffectiveSession, identity: string): QuotaRef | undefined {
  if (eff.quota_max === undefined || eff.quota_max <= 0) return undefined;
  return { bucket: `q:${identity}`, spec: { max: eff.quota_max, renewal: eff.quota_renewal_rate ?? 0 } };
}

export function quotaFor(eff: EffectiveSession, identity: string, apiId: string): QuotaRef | undefined {
  const l = eff.access_rights[apiId]?.limit;
  if (l?.quota_max !== undefined) {
    return l.quota_max > 0
      ? { bucket: `q:${identity}:a:${apiId}`, spec: { max: l.quota_max, renewal: l.quota_renewal_rate ?? 0 } }
      : undefined;
  }
  return keyQuota(eff, identity);
}

/**
 * The quota buckets a key's reset clears (global and per-API). None when the key counts against a custom
 * rate-limit key (`p:` identity, docs/contract.md#rate-limit-pattern): that quota is shared with every key of the same pattern value, and
 * adding or editing one member key must not hand the whole group a fresh quota (docs/contract.md#quotas resets *its* counter).
 */
export function quotaBuckets(eff: EffectiveSession | undefined, identity: string): string[] {
  if (identity.startsWith('p:')) return [];
  return [`q:${identity}`, ...Object.keys(eff?.access_rights ?? {}).map((a) => `q:${identity}:a:${a}`)];
}

/** Every quota bucket of a key under `config` (policies applied, custom rate-limit key expanded): what a quota reset clears. */
export function keyQuotaBuckets(keyHash: string, stored: StoredSession, config: CompiledConfig): string[] {
  const eff = effectiveSession(stored, config);
  if (eff instanceof Error) return quotaBuckets(undefined, `h:${keyHash}`);
  return quotaBuckets(eff, limiterIdentity(keyHash, eff.rate_limit_pattern, eff.meta_data));
}
