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
 * This file holds the steps of a decision in order (check → keyScope → quotaStep); beside it, each in a
 * file of its own: what it tells of smoothing (smoothing-report.ts), the per-client buckets
 * (client-buckets.ts), a key's identity (identities.ts), the quota's verdict (quota-step.ts), throttling
 * (throttle.ts).
 */
import type { Clock } from '../../lib/clock.js';
import type { GatewayOptionsT } from '../../lib/options.js';
import type { StoredSession } from '../../contract/sessions.js';
import type { StoreClient } from '../../lib/store/redis.js';
import type { CompiledConfig, LimitSpec } from '../../contract/config.js';
import type { PeerCount } from '../../limiters/drl.js';
import type { QuotaState } from '../../limiters/quota.js';
import { createLimiters, type Limiters } from '../../limiters/select.js';
import type { LimitResult, MaybePromise } from '../../limiters/types.js';
import { matchApiRule } from '../../contract/limits/endpoint-match.js';
import { keyLimitFor, keyQuota, quotaBuckets, quotaFor, type KeyLimit } from '../../contract/limits/key-limits.js';
import { Throttle, type Sleep } from './throttle.js';
import { ClientBuckets } from './client-buckets.js';
import { Identities, type Who } from './identities.js';
import { consumeQuota, headersOf, quotaVerdict } from './quota-step.js';
import { SmoothingReport, type SmoothingListeners } from './smoothing-report.js';
import type { CheckRequest, Engine, HeaderNumbers, LimitRefusal, Verdict } from './types.js';

export { NEVER_RETRY_AFTER } from './quota-step.js';
export type { EngineSmoothingEvent, SmoothingUnsupported } from './smoothing-report.js';

export interface EngineDeps extends SmoothingListeners {
  options: GatewayOptionsT;
  clock: Clock;
  config: () => CompiledConfig;
  /** The shared store; absent = every limit in memory (standalone). */
  redis?: StoreClient;
  /** Alias of `redis`. */
  store?: StoreClient;
  /** Live gateways of the DRL group (default 1). */
  peers?: PeerCount;
  /** Every store error (the request then follows kv_failure_mode). */
  onStoreError?: (e: Error) => void;
  /** A limiter or quota bucket whose store keys held another type was removed (bad store content, repaired). */
  onStoreRepair?: (bucket: string) => void;
  /** Throttling's wait; a timer by default. */
  sleep?: Sleep;
  /** Deadline of one store call on the request path (ms; default options.kv_deadline_ms = 1000); over it kv_failure_mode decides. */
  storeDeadlineMs?: number;
  /** The DRL lost the store (true: even split over the last known peers) or has it back (false). */
  onDrlFallback?: (active: boolean, e?: Error) => void;
  /** A per-client bucket was evicted from the LRU of max_client_buckets (its in-process state dropped). */
  onClientBucketEvicted?: () => void;
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

export function createEngine(d: EngineDeps): GatewayEngine {
  const o = d.options;
  // strict_paths (docs/contract.md#gateway-configuration): endpoint rules match in any ASCII case, and HEAD as GET
  const strict = o.strict_paths;
  const ruleMethod = (m: string): string => (strict && m === 'HEAD' ? 'GET' : m);
  const redis = d.redis ?? d.store;
  // smoothing events name their bucket's API and policy; a limit its limiter cannot smooth is reported once
  const smoothing = new SmoothingReport(d, o.enable_rate_limit_smoothing);
  const limiters = createLimiters({
    options: o,
    clock: d.clock,
    redis,
    peers: d.peers ?? (() => 1),
    onStoreError: d.onStoreError,
    onStoreRepair: d.onStoreRepair,
    storeDeadlineMs: d.storeDeadlineMs ?? o.kv_deadline_ms,
    onDrlFallback: d.onDrlFallback,
    onSmoothing: smoothing.event,
  });
  const throttle = new Throttle(o.max_throttled_requests, d.sleep);
  const rateHeaders = o.rate_limit_response_headers === 'rate_limits';
  const clients = new ClientBuckets(o.max_client_buckets, limiters, d.onClientBucketEvicted);
  const identities = new Identities(d.config);
  const who = (keyHash: string, stored: StoredSession): Who | Error => identities.who(keyHash, stored);

  const check = (
    bucket: string,
    limit: LimitSpec,
    apiId: string,
    tentative = false,
    policy?: string,
  ): MaybePromise<LimitResult> => {
    const limiter = limiters.forLimit(limit);
    if (limit.smoothing) smoothing.note(limiters, limiter, bucket, limit, apiId, policy);
    return limiter.check(bucket, limit, tentative);
  };

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
    const qr = consumeQuota(limiters, o, q.bucket, q.spec, d.onStoreRepair);
    return qr instanceof Promise
      ? qr.then((r) => quotaVerdict(d.clock, q.spec, r, rlHeaders(apiResult, keyResult), rateHeaders))
      : quotaVerdict(d.clock, q.spec, qr, rlHeaders(apiResult, keyResult), rateHeaders);
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
          rule.by ? clients.bucket(req, api, rule.by, rule.id) : `a:${api.namespace}/${api.api_id}:e:${rule.id}`,
          { rate: rule.rate, per: rule.per },
          api.api_id,
        );
      else if (api.apiLimit) {
        const by = api.apiLimit.by;
        r = check(by ? clients.bucket(req, api, by) : `a:${api.namespace}/${api.api_id}`, api.apiLimit, api.api_id);
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

    clientBuckets: () => clients.size,
  };
}
