/**
 * The authenticate step of a key API (auth.ts reads the key): 401 without a key; else the session of its
 * hash (synchronous when the session store holds it in process), then the authorise step.
 */
import type { Exchange } from './exchange.js';
import { extractKey, keyHashOf } from './auth.js';
import { authorise, lookupFailed } from './authorise.js';
import { ERRORS, answer } from './respond.js';

export function authenticateKey(x: Exchange): void {
  const key = extractKey(x.req.headers, x.api.authHeader);
  if (!key) {
    x.gw.metrics.request(x.api.api_id, 401);
    return answer(x.res, 401, { error: ERRORS.authMissing });
  }
  x.keyHash = keyHashOf(key);
  const found = x.gw.deps.lookupSession(x.keyHash);
  if (found instanceof Promise) {
    if (x.span !== undefined) x.gw.observer?.storeWait(x, found, 'gw.session_lookup');
    found.then(
      (s) => authorise(x, s),
      (e: unknown) => lookupFailed(x, e),
    );
  } else authorise(x, found);
}
