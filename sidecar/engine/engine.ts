/**
 * The limiter engine (docs/contract.md#request-path steps 2–4): API scope, then key scope, then quota.
 *   API scope: the first matching per-endpoint rule, else the API's global limit (absent when
 *     disabled). A refusal here consumes no key allowance and no quota.
 *   Key scope: the most specific limit of the key (key-limits.ts), one check, throttled retries
 *     (throttle.ts), then refusal.
 *   Quota: per-API quota when the access definition sets quota_max, else the key's.
 * Headers (docs/contract.md#responses): `rate_limits` → the checked limit; with both scopes checked, the one with fewer
 * requests remaining (the key's on a tie). `quotas` → quota_max, quota_remaining, quota_renews.
 * Per-client API limits (docs/contract.md#limit-by, `limit_by`): the API-scope bucket gets the client's identity
 * (client-bucket.ts), so every algorithm counts clients apart; the in-process state of those buckets is
 * bounded by a set of max_client_buckets recently used names, whose evictions the limiters forget.
 */
import type { Clock } from '../../lib/clock.js';
import type { GatewayOptionsT } from '../../lib/options.js';
import type { StoredSession } from '../../contract/sessions.js';
import type { StoreClient } from '../../lib/store/redis.js';
import { isWrongType } from '../../lib/store/store-calls.js';
import type { ClientKey, CompiledApi, CompiledConfig, LimitSpec } from '../../contract/config.js';
import { clientBucket } from '../../contract/limits/client-bucket.js';
import { RecentSet } from '../../lib/recent-set.js';
import type { PeerCount } from '../../limiters/drl.js';
import { smoothingActive } from '../../limiters/smoothing.js';
import type { QuotaResult, QuotaSpec, QuotaState } from '../../limiters/quota.js';
import { createLimiters, type Limiters } from '../../limiters/select.js';
import type { LimitResult, MaybePromise, SmoothingEvent } from '../../limiters/types.js';
import { effectiveSession, type EffectiveSession } from '../../contract/limits/effective-session.js';
import { matchApiRule } from '../../contract/limits/endpoint-match.js';
import { keyLimitFor, keyQuota, quotaBuckets, quotaFor, type KeyLimit } from '../../contract/limits/key-limits.js';
import { limiterIdentity } from '../../contract/limits/rate-limit-key.js';
import { Throttle, type Sleep } from './throttle.js';
import type { CheckRequest, Engine, HeaderNumbers, LimitRefusal, Verdict } from './types.js';

/** A smoothing event with its API and, when a policy configured the limit, that policy's name. */
export type EngineSmoothingEvent = SmoothingEvent & { api_id: string; policy?: string };

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
  /** A limiter or quota bucket whose store keys held another type was removed (bad store content, repaired). */
  onStoreRepair?: (bucket: string) => void;
  /** Throttling's wait; a timer by default. */
  sleep?: Sleep;
  /** Deadline of one store call on the request path (ms; default options.kv_deadline_ms = 1000); over it kv_failure_mode decides. */
  storeDeadlineMs?: number;
  /**
   * A limit configures smoothing but the limiter that counts it cannot smooth (fixed window, or the DRL
   * for a limit above drl_threshold): the smoothing is refused (the plain rate applies) and reported
   * here once per bucket, so the operator sees it in the logs and metrics.
   */
  onSmoothingUnsupported?: (e: SmoothingUnsupported) => void;
  /** The DRL lost the store (true: even split over the last known peers) or has it back (false). */
  onDrlFallback?: (active: boolean, e?: Error) => void;
  /** A per-client bucket was evicted from the LRU of max_client_buckets (its in-process state dropped). */
  onClientBucketEvicted?: () => void;
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
  readQuota(
    keyHash: string,
    stored: StoredSession,
    apiId?: string,
  ): Promise<(QuotaState & { max: number }) | undefined>;
  /** The identity limits and quotas of a key count against (custom rate-limit key or key hash). */
  identityOf(keyHash: string, stored: StoredSession): string | Error;
  /** Per-client buckets (limit_by) whose in-process state this engine keeps (≤ max_client_buckets). */
  clientBuckets(): number;
}

/** Retry-After of a quota that never renews: one year (HTTP has no "never"). */
export const NEVER_RETRY_AFTER = 365 * 24 * 3600;

const headersOf = (r: LimitResult): HeaderNumbers => ({ limit: r.limit, remaining: r.remaining, reset: r.reset });

/** A key's effective session and the identity its limits count against. */
interface Who {
  eff: EffectiveSession;
  identity: string;
}

export function createEngine(d: EngineDeps): GatewayEngine {
  const o = d.options;
  // strict_paths (docs/contract.md#gateway-configuration): endpoint rules match in any ASCII case, and HEAD as GET
  const strict = o.strict_paths;
  const ruleMethod = (m: string): string => (strict && m === 'HEAD' ? 'GET' : m);
  const redis = d.redis ?? d.store;
  // smoothed buckets → their API and configuring policy (what an event names)
  const bucketApi = new Map<string, { api_id: string; policy?: string }>();
  const limiters = createLimiters({
    options: o,
    clock: d.clock,
    redis,
    peers: d.peers ?? (() => 1),
    onStoreError: d.onStoreError,
    onStoreRepair: d.onStoreRepair,
    storeDeadlineMs: d.storeDeadlineMs ?? o.kv_deadline_ms,
    onDrlFallback: d.onDrlFallback,
    onSmoothing: (e, allowance) => {
      const of = bucketApi.get(e.limiterKey);
      const api_id = of?.api_id ?? '';
      d.onSmoothingEvent?.({ ...e, api_id, ...(of?.policy !== undefined ? { policy: of.policy } : {}) });
      d.onSmoothingAllowance?.(api_id, allowance);
    },
  });
  const throttle = new Throttle(o.max_throttled_requests, d.sleep);
  const rateHeaders = o.rate_limit_response_headers === 'rate_limits';

  const smoothingOn = o.enable_rate_limit_smoothing;
  const reportedUnsupported = new Set<string>();
  const check = (
    bucket: string,
    limit: LimitSpec,
    apiId: string,
    tentative = false,
    policy?: string,
  ): MaybePromise<LimitResult> => {
    const limiter = limiters.forLimit(limit);
    if (limit.smoothing && smoothingOn && smoothingActive(limit.smoothing)) {
      if (limiters.canSmooth(limiter)) {
        const known = bucketApi.get(bucket);
        if (known === undefined || known.api_id !== apiId || known.policy !== policy) {
          if (bucketApi.size > 100_000) bucketApi.clear();
          bucketApi.set(bucket, { api_id: apiId, policy });
        }
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
    return limiter.check(bucket, limit, tentative);
  };

  /** The quota's answer: synchronous in memory; from the store under its deadline and kv_failure_mode. */
  function consumeQuota(bucket: string, spec: QuotaSpec): MaybePromise<QuotaResult> {
    return limiters.storeCalls.guard(
      () => limiters.quota.consume(bucket, spec),
      (e) => {
        if (isWrongType(e)) {
          d.onStoreRepair?.(bucket);
          void limiters.quota.reset(bucket).catch(() => undefined);
        }
        return o.kv_failure_mode === 'open'
          ? { allowed: true, max: spec.max, remaining: 0, renews: 0 }
          : { allowed: false, max: spec.max, remaining: 0, renews: 0, unavailable: true };
      },
    );
  }

  /**
   * `quotas` mode, a 429: the headers still carry the key's quota (docs/contract.md#responses), read without consuming it (the
   * refused request does not count against the quota). No quota, or a store that does not answer in
   * time: no headers.
   */
  function withQuotaHeaders(req: CheckRequest, v: LimitRefusal): MaybePromise<Verdict> {
    if (req.api.keyless || !req.session || req.keyHash === undefined) return v;
    const w = who(req.keyHash, req.session);
    if (w instanceof Error) return v;
    const q = quotaFor(w.eff, w.identity, req.api.api_id);
    if (!q) return v;
    return limiters.storeCalls.guard(
      () =>
        limiters.quota
          .read(q.bucket, q.spec)
          .then((s): Verdict => ({ ...v, headers: { limit: q.spec.max, remaining: s.remaining, reset: s.renews } })),
      () => v,
    );
  }

  /** Headers of the checked limit(s): with both scopes, the one with fewer requests remaining (the key's on a tie). */
  function rlHeaders(
    apiResult: LimitResult | undefined,
    keyResult: LimitResult | undefined,
  ): HeaderNumbers | undefined {
    if (!rateHeaders) return undefined;
    if (keyResult && apiResult) return headersOf(apiResult.remaining < keyResult.remaining ? apiResult : keyResult);
    const r = keyResult ?? apiResult;
    return r && headersOf(r);
  }

  // Per-client buckets: the set holds their names only (the limiters hold the state), and a name evicted
  // to make room (the one least recently used, to the CLOCK approximation of lib/recent-set.ts) is
  // forgotten by the limiters that may hold it in process. Made on first use.
  let clients: RecentSet | undefined;
  function clientSet(): RecentSet {
    return (clients ??= new RecentSet(o.max_client_buckets, (bucket) => {
      limiters.drl.forget(bucket);
      limiters.store.forget(bucket);
      d.onClientBucketEvicted?.();
    }));
  }
  /** The bucket of this request's client of a per-client API limit, marked as used. */
  function perClient(req: CheckRequest, api: CompiledApi, by: ClientKey, ruleId?: string): string {
    const bucket = clientBucket(`a:${api.namespace}/${api.api_id}`, by, req.client?.(by) ?? '', ruleId);
    clientSet().touch(bucket);
    return bucket;
  }

  // the identity is a function of the key hash and the (cached, never mutated) effective session: kept
  // with the latter so the identity string is not built on every request
  const identities = new WeakMap<EffectiveSession, Who & { keyHash: string }>();
  function who(keyHash: string, stored: StoredSession): Who | Error {
    const eff = effectiveSession(stored, d.config());
    if (eff instanceof Error) return eff;
    const hit = identities.get(eff);
    if (hit !== undefined && hit.keyHash === keyHash) return hit;
    const w = { keyHash, eff, identity: limiterIdentity(keyHash, eff.rate_limit_pattern, eff.meta_data) };
    identities.set(eff, w);
    return w;
  }

  // The steps of a check, each a function: with in-process limiters the whole decision is synchronous
  // (no promise, no async frame per request); a store-backed step continues when its answer arrives.

  function keyScope(req: CheckRequest, apiResult: LimitResult | undefined): MaybePromise<Verdict> {
    if (apiResult && !apiResult.allowed) {
      if (apiResult.unavailable) return { kind: 'unavailable', retryAfter: apiResult.retryAfter };
      const v = { kind: 'api_limited', retryAfter: apiResult.retryAfter } as const;
      return rateHeaders ? { ...v, headers: headersOf(apiResult) } : withQuotaHeaders(req, v);
    }
    if (req.api.keyless || !req.session || req.keyHash === undefined) {
      return { kind: 'allow', headers: apiResult && rateHeaders ? headersOf(apiResult) : undefined };
    }
    // 3. key scope. A key whose policies are missing or inactive is refused before it gets here
    // (the proxy asks effectiveSession for its access rights); should one arrive, it is refused.
    const w = who(req.keyHash, req.session);
    if (w instanceof Error) return { kind: 'key_limited', retryAfter: 1 };
    const apiId = req.api.api_id;
    const kl = keyLimitFor(w.eff, w.identity, apiId, ruleMethod(req.method), req.path, strict);
    if (!kl) return quotaStep(req, w, apiResult, undefined);
    // Throttling (docs/contract.md#throttling): while a request may still be retried its checks are tentative (counted only if
    // admitted); the refusal it finally gets is counted once, by a last ordinary check. So one request is
    // one entry of the sliding log, and its own refused attempts never hold its retries back.
    const throttling = kl.throttle.retries > 0;
    const first = check(kl.bucket, kl.limit, apiId, throttling, kl.policy);
    const next = (r: LimitResult): MaybePromise<Verdict> =>
      r.allowed || !throttling || r.unavailable ? quotaStep(req, w, apiResult, r) : throttled(req, w, apiResult, kl, r);
    return first instanceof Promise ? first.then(next) : next(first);
  }

  /** A refused request with throttle retries: tentative re-checks, then its final answer counted once. */
  async function throttled(
    req: CheckRequest,
    w: Who,
    apiResult: LimitResult | undefined,
    kl: KeyLimit,
    first: LimitResult,
  ): Promise<Verdict> {
    const apiId = req.api.api_id;
    let r = await throttle.retry(
      first,
      kl.throttle.interval,
      kl.throttle.retries,
      () => check(kl.bucket, kl.limit, apiId, true, kl.policy),
      req,
    );
    // abandoned while it waited: not checked again, so it counts against nothing (no log entry, no quota)
    if (r === undefined) return { kind: 'disallowed' };
    if (!r.allowed) r = await check(kl.bucket, kl.limit, apiId, false, kl.policy);
    return quotaStep(req, w, apiResult, r);
  }

  function quotaStep(
    req: CheckRequest,
    w: Who,
    apiResult: LimitResult | undefined,
    keyResult: LimitResult | undefined,
  ): MaybePromise<Verdict> {
    if (keyResult && !keyResult.allowed) {
      if (keyResult.unavailable) return { kind: 'unavailable', retryAfter: keyResult.retryAfter };
      const v = { kind: 'key_limited', retryAfter: keyResult.retryAfter } as const;
      return rateHeaders ? { ...v, headers: rlHeaders(apiResult, keyResult) } : withQuotaHeaders(req, v);
    }
    // 4. quota
    const q = quotaFor(w.eff, w.identity, req.api.api_id);
    if (!q) return { kind: 'allow', headers: rlHeaders(apiResult, keyResult) };
    const qr = consumeQuota(q.bucket, q.spec);
    return qr instanceof Promise
      ? qr.then((r) => quotaVerdict(q.spec, r, apiResult, keyResult))
      : quotaVerdict(q.spec, qr, apiResult, keyResult);
  }

  function quotaVerdict(
    spec: QuotaSpec,
    qr: QuotaResult,
    apiResult: LimitResult | undefined,
    keyResult: LimitResult | undefined,
  ): Verdict {
    const headers = rateHeaders
      ? rlHeaders(apiResult, keyResult)
      : { limit: qr.max, remaining: qr.remaining, reset: qr.renews };
    if (!qr.allowed) {
      if (qr.unavailable) return { kind: 'unavailable', retryAfter: 1 };
      // seconds to the renewal, from its ms (the rounded seconds overstated the wait by up to 2 s); a quota
      // that never renews (renewal ≤ 0): a year, not "1" (clients would retry every second forever)
      const nowMs = d.clock.now();
      const renewsMs = qr.renewsMs ?? qr.renews * 1000;
      const retryAfter =
        spec.renewal <= 0
          ? NEVER_RETRY_AFTER
          : renewsMs > 0
            ? Math.max(1, Math.ceil((renewsMs - nowMs) / 1000))
            : spec.renewal;
      return { kind: 'quota_exceeded', headers, retryAfter };
    }
    return { kind: 'allow', headers };
  }

  return {
    limiters,

    check(req: CheckRequest): MaybePromise<Verdict> {
      // 2. API scope: bucket names built only when the API has a limit (most APIs with keys have none)
      const { api } = req;
      const rule = matchApiRule(api, ruleMethod(req.method), req.path, strict);
      let r: MaybePromise<LimitResult> | undefined;
      if (rule)
        r = check(
          rule.by ? perClient(req, api, rule.by, rule.id) : `a:${api.namespace}/${api.api_id}:e:${rule.id}`,
          { rate: rule.rate, per: rule.per },
          api.api_id,
        );
      else if (api.apiLimit) {
        const by = api.apiLimit.by;
        r = check(by ? perClient(req, api, by) : `a:${api.namespace}/${api.api_id}`, api.apiLimit, api.api_id);
      }
      return r instanceof Promise ? r.then((apiResult) => keyScope(req, apiResult)) : keyScope(req, r);
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

    clientBuckets: () => clients?.size ?? 0,
  };
}
