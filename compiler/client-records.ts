/**
 * OAuthClient → the client record gateways authenticate against (contract/oauth/clients.ts): the spec
 * without the secret, the secret as its SHA-256 only, the resource's uid. The operator writes it to
 * Redis; standalone keeps it in memory. dcr_registration.access_token is a credential too and is left out.
 */
import { secretValue, type OAuthClient, type Secret } from '../crds/kinds.js';
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

export type MissingClientReference = [reason: 'ApiNotFound' | 'PolicyNotFound' | 'SecretNotFound', message: string];

/**
 * What an OAuthClient needs that does not exist, every one named (the reason of its Ready condition is
 * the first one's): its API, its policy when it names one, its Secret holding the named key. The
 * operator (reconcile-client.ts) and `gw validate` pass how they know what exists.
 */
export function missingClientReferences(
  c: OAuthClient,
  hasApi: (apiId: string) => boolean,
  hasPolicy: (name: string) => boolean,
  secret: Secret | undefined,
): MissingClientReference[] {
  const ns = c.metadata.namespace;
  const ref = c.spec.secretRef;
  const missing: MissingClientReference[] = [];
  if (!hasApi(c.spec.api_id)) missing.push(['ApiNotFound', `API ${c.spec.api_id} not found in namespace ${ns}`]);
  if (c.spec.policy_id && !hasPolicy(c.spec.policy_id))
    missing.push(['PolicyNotFound', `policy ${c.spec.policy_id} not found in namespace ${ns}`]);
  if (!(secret && secretValue(secret, ref.key)))
    missing.push(['SecretNotFound', `Secret ${ns}/${ref.name} with key ${JSON.stringify(ref.key)} not found`]);
  return missing;
}
