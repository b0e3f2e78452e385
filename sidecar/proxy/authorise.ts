/**
 * The authorise step, after a key or bearer token named its session: the session must be usable and its
 * access rights reach this API, method and path (exchange.ts `admits`), else 403; then the limits decide.
 */
import type { StoredSession } from '../../contract/sessions.js';
import { StoreUnavailableError } from '../../lib/store/store-calls.js';
import { admits, type Exchange } from './exchange.js';
import { limit } from './limit.js';
import { ERRORS, answer } from './respond.js';

export function authorise(x: Exchange, found: StoredSession | undefined): void {
  try {
    if (!admits(x, found)) {
      x.gw.metrics.request(x.api.api_id, 403);
      return answer(x.res, 403, { error: ERRORS.disallowed });
    }
    x.session = found;
    limit(x);
  } catch (e) {
    x.gw.fail(x.res, e);
  }
}

/** The session store cannot answer and knows nothing of the key: 503, the client may retry (the store's own errors are logged by it). */
export function lookupFailed(x: Exchange, e: unknown): void {
  if (!(e instanceof StoreUnavailableError)) return x.gw.fail(x.res, e);
  x.gw.metrics.request(x.api.api_id, 503);
  answer(x.res, 503, { error: ERRORS.sessionStore }, { 'retry-after': '1' });
}
