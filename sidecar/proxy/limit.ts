/**
 * The limit step: the limiter engine's verdict on the request (API scope → key scope → quota,
 * sidecar/engine/engine.ts), then a refusal answered with its status and X-RateLimit-* / Retry-After, or
 * the forward step. With limits in process the verdict is synchronous; from the store it is a promise.
 */
import type { MaybePromise } from '../../limiters/types.js';
import type { Verdict } from '../engine/types.js';
import type { Exchange } from './exchange.js';
import { forwardRequest } from './forward-request.js';
import { ERRORS, answer, rateLimitHeaders } from './respond.js';

/** A refusal's answer: status, error, and the scope its metric is counted under. */
interface Refusal {
  readonly status: number;
  readonly error: string;
  readonly scope: string;
}
const REFUSALS: Record<Exclude<Verdict['kind'], 'allow'>, Refusal> = {
  api_limited: { status: 429, error: ERRORS.apiLimited, scope: 'api' },
  key_limited: { status: 429, error: ERRORS.keyLimited, scope: 'key' },
  quota_exceeded: { status: 403, error: ERRORS.quota, scope: 'quota' },
  disallowed: { status: 403, error: ERRORS.disallowed, scope: 'auth' },
  unavailable: { status: 503, error: ERRORS.rateLimiterUnavailable, scope: 'unavailable' },
};

export function limit(x: Exchange): void {
  x.t0 = performance.now();
  let v: MaybePromise<Verdict>;
  try {
    v = x.gw.deps.engine.check(x);
  } catch (e) {
    return x.gw.fail(x.res, e, 'limiter failed', x);
  }
  if (v instanceof Promise) {
    if (x.span !== undefined) x.gw.observer?.storeWait(x, v, 'gw.rate_limit');
    v.then(
      (verdict) => limited(x, verdict),
      (e: unknown) => x.gw.fail(x.res, e, 'limiter failed', x),
    );
  } else limited(x, v);
}

/** The engine's verdict: counted, then answered here (a refusal) or forwarded. */
function limited(x: Exchange, verdict: Verdict): void {
  try {
    const now = performance.now();
    x.gw.metrics.decision((now - x.t0) / 1000);
    x.decision = verdict.kind;
    if (verdict.kind !== 'allow') {
      const { status, error, scope } = REFUSALS[verdict.kind];
      x.gw.metrics.refused(x.api.api_id, scope);
      x.gw.metrics.request(x.api.api_id, status);
      return answer(x.res, status, { error }, rateLimitHeaders(verdict.headers, verdict.retryAfter));
    }
    forwardRequest(x, verdict, now);
  } catch (e) {
    x.gw.fail(x.res, e);
  }
}
