/**
 * The authenticate step of an OAuth API (docs/contract.md#oauth-endpoints): its oauth/* endpoints, else a
 * bearer access token of one of its clients. Missing → 401 as for keys; unknown, expired or revoked → 401
 * invalid_token (RFC 6750 §3.1); a valid one → the authorise step with its client's session.
 */
import type { CompiledOAuth } from '../../contract/config.js';
import type { ClientSession } from '../../contract/oauth/client-session.js';
import { oauthEndpointOf } from '../oauth/endpoints.js';
import type { Exchange } from './exchange.js';
import { extractKey, keyHashOf } from './auth.js';
import { authorise, lookupFailed } from './authorise.js';
import { ERRORS, answer } from './respond.js';
import { connectionOf } from '../../lib/http/connection.js';

export function authenticateBearer(x: Exchange, oauth: CompiledOAuth): void {
  const { gw } = x;
  const endpoint = oauthEndpointOf(x.path);
  if (endpoint !== undefined) {
    if (!gw.deps.oauth) {
      gw.metrics.request(x.api.api_id, 503);
      return answer(x.res, 503, { error: 'server_error', error_description: 'OAuth is unavailable' });
    }
    void gw.deps.oauth.endpoints
      .serve(
        endpoint,
        x.api,
        oauth,
        x.req,
        x.res,
        x.q === -1 ? '' : x.url.slice(x.q + 1),
        gw.clients.of(connectionOf(x.req)?.remoteAddress, x.req.headers['x-forwarded-for']),
      )
      .then((status) => gw.metrics.request(x.api.api_id, status));
    return;
  }
  const token = extractKey(x.req.headers, x.api.authHeader);
  if (!token) {
    gw.metrics.request(x.api.api_id, 401);
    return answer(x.res, 401, { error: ERRORS.authMissing });
  }
  x.tokenHash = keyHashOf(token);
  const found = gw.deps.oauth ? gw.deps.oauth.bearer(x.tokenHash, x.api) : undefined;
  if (found instanceof Promise)
    found.then(
      (s) => bearerFound(x, s),
      (e: unknown) => lookupFailed(x, e),
    );
  else bearerFound(x, found);
}

function bearerFound(x: Exchange, cs: ClientSession | undefined): void {
  if (cs === undefined) {
    x.gw.metrics.request(x.api.api_id, 401);
    x.gw.deps.metrics.oauthErrors.inc({ api: x.api.api_id, error: 'invalid_token' });
    return answer(
      x.res,
      401,
      { error: 'invalid_token' },
      { 'www-authenticate': 'Bearer error="invalid_token"', 'cache-control': 'no-store' },
    );
  }
  x.keyHash = cs.identityHash;
  authorise(x, cs.stored);
}
