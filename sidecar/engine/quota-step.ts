/**
 * The quota's part of a decision (docs/contract.md#request-path, step 4): the quota consumed under the
 * store's deadline and kv_failure_mode, its verdict and Retry-After, and in `quotas` header mode the
 * quota read without consuming it for a refusal's headers (docs/contract.md#responses).
 */
import type { GatewayOptionsT } from '../../lib/options.js';
import { isWrongType } from '../../lib/store/store-calls.js';
import type { Clock } from '../../lib/clock.js';
import type { QuotaResult, QuotaSpec } from '../../limiters/quota.js';
import type { Limiters } from '../../limiters/select.js';
import type { LimitResult, MaybePromise } from '../../limiters/types.js';
import type { HeaderNumbers, Verdict } from './types.js';

/** Retry-After of a quota that never renews: one year (HTTP has no "never"). */
export const NEVER_RETRY_AFTER = 365 * 24 * 3600;

export const headersOf = (r: LimitResult): HeaderNumbers => ({
  limit: r.limit,
  remaining: r.remaining,
  reset: r.reset,
});

/** The quota's answer: synchronous in memory; from the store under its deadline and kv_failure_mode. */
export function consumeQuota(
  limiters: Limiters,
  o: GatewayOptionsT,
  bucket: string,
  spec: QuotaSpec,
  onStoreRepair: ((bucket: string) => void) | undefined,
): MaybePromise<QuotaResult> {
  return limiters.storeCalls.guard(
    () => limiters.quota.consume(bucket, spec),
    (e) => {
      if (isWrongType(e)) {
        onStoreRepair?.(bucket);
        void limiters.quota.reset(bucket).catch(() => undefined);
      }
      return o.kv_failure_mode === 'open'
        ? { allowed: true, max: spec.max, remaining: 0, renews: 0 }
        : { allowed: false, max: spec.max, remaining: 0, renews: 0, unavailable: true };
    },
  );
}

/** The verdict of a consumed quota; `headers` are the rate-limit ones (`rate_limits` mode) or undefined (`quotas`). */
export function quotaVerdict(
  clock: Clock,
  spec: QuotaSpec,
  qr: QuotaResult,
  rateHeaders: HeaderNumbers | undefined,
  rateMode: boolean,
): Verdict {
  const headers = rateMode ? rateHeaders : { limit: qr.max, remaining: qr.remaining, reset: qr.renews };
  if (!qr.allowed) {
    if (qr.unavailable) return { kind: 'unavailable', retryAfter: 1 };
    // seconds to the renewal, from its ms (the rounded seconds overstated the wait by up to 2 s); a quota
    // that never renews (renewal ≤ 0): a year, not "1" (clients would retry every second forever)
    const nowMs = clock.now();
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
