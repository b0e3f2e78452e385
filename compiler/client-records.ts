/**
 * OAuthClient → the client record gateways authenticate against (contract/oauth/clients.ts): the spec
 * without the secret, the secret as its SHA-256 only, the resource's uid. The operator writes it to
 * Redis; standalone keeps it in memory. dcr_registration.access_token is a credential too and is left out.
 */
import type { OAuthClient } from '../crds/kinds.js';
import { sha256hex } from '../lib/hash.js';
import type { ClientRecord } from '../contract/oauth/clients.js';

export function clientRecordOf(c: OAuthClient, secret: string): ClientRecord {
  const s = c.spec;
  return {
    namespace: c.metadata.namespace,
    name: c.metadata.name,
    // tokens name the uid they were issued to: a client deleted and created again gets none of them back
    ...(c.metadata.uid !== undefined ? { uid: c.metadata.uid } : {}),
    api_id: s.api_id,
    client_id: s.client_id,
    ...(s.client_name !== undefined ? { client_name: s.client_name } : {}),
    ...(s.description !== undefined ? { description: s.description } : {}),
    ...(s.policy_id ? { policy_id: s.policy_id } : {}),
    ...(s.redirect_uri ? { redirect_uri: s.redirect_uri } : {}),
    ...(s.meta_data !== undefined ? { meta_data: s.meta_data } : {}),
    ...(s.dcr_registration
      ? { dcr_registration: { client_uri: s.dcr_registration.client_uri, provider: s.dcr_registration.provider } }
      : {}),
    secret_hash: sha256hex(secret),
  };
}
