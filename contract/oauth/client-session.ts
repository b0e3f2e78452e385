/**
 * The session a bearer token gets (docs/contract.md#oauth-tokens): its client's Policy (`policy_id`) applied at request time,
 * as a key's apply_policies are, so a changed policy applies at the next request. The limiter identity is
 * the client's, not the token's: every token of one client shares one allowance and one quota (a policy's
 * rate_limit_pattern still replaces it, expanded against the client's meta_data).
 */
import { sha256hex } from '../../lib/hash.js';
import type { StoredSession } from '../sessions.js';
import type { ClientRecord } from './clients.js';

export interface ClientSession {
  stored: StoredSession;
  /** Stands in for a key hash: the limiter identity is `h:<identityHash>` (never a token's hash). */
  identityHash: string;
}

const sessions = new WeakMap<ClientRecord, ClientSession>();

/** The identity of a client for limits and quotas. */
export function clientIdentityHash(ns: string, apiId: string, clientId: string): string {
  return sha256hex(`oauth-client\u0000${ns}\u0000${apiId}\u0000${clientId}`);
}

/** The session of a client's tokens, built once per client record. */
export function clientSession(c: ClientRecord): ClientSession {
  let s = sessions.get(c);
  if (s === undefined) {
    s = {
      stored: {
        namespace: c.namespace,
        name: c.name,
        session: {
          apply_policies: c.policy_id ? [c.policy_id] : [],
          ...(c.meta_data ? { meta_data: c.meta_data } : {}),
        },
      },
      identityHash: clientIdentityHash(c.namespace, c.api_id, c.client_id),
    };
    sessions.set(c, s);
  }
  return s;
}
