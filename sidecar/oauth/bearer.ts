/**
 * A bearer access token on an OAuth API (docs/contract.md#oauth-tokens) → the session of its client's policy, or undefined
 * (unknown, expired, revoked, another API's, or its client deleted or replaced: 401 invalid_token).
 * Looked up like a key: by SHA-256 (hashed once per distinct token, auth.ts's cache), from caches that
 * answer synchronously, so a busy token costs the request path no promise.
 */
import type { Clock } from '../../lib/clock.js';
import type { CompiledApi } from '../../contract/config.js';
import { clientSession, type ClientSession } from '../../contract/oauth/client-session.js';
import type { ClientDirectory, ClientRecord } from '../../contract/oauth/clients.js';
import type { TokenRecord, TokenStore } from '../../contract/oauth/tokens.js';
import type { MaybePromise } from '../../limiters/types.js';

export type BearerLookup = (tokenHash: string, api: CompiledApi) => MaybePromise<ClientSession | undefined>;

export function createBearerLookup(tokens: TokenStore, clients: ClientDirectory, clock: Clock): BearerLookup {
  function withClient(t: TokenRecord, c: ClientRecord | null | undefined): ClientSession | undefined {
    return c && (c.uid ?? '') === t.cuid ? clientSession(c) : undefined;
  }
  function withToken(t: TokenRecord | null | undefined, api: CompiledApi): MaybePromise<ClientSession | undefined> {
    if (!t || t.kind !== 'access' || t.api_id !== api.api_id || t.ns !== api.namespace) return undefined;
    if (t.exp * 1000 <= clock.now()) return undefined;
    const c = clients.peek(t.ns, t.api_id, t.client_id);
    return c === undefined ? clients.get(t.ns, t.api_id, t.client_id).then((r) => withClient(t, r)) : withClient(t, c);
  }
  return (tokenHash, api) => {
    const t = tokens.peek(tokenHash);
    return t === undefined ? tokens.get(tokenHash).then((r) => withToken(r, api)) : withToken(t, api);
  };
}
