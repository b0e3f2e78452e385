/**
 * What an AccessKey's session refers to that does not exist (docs/contract.md#resources: a resource that refers to
 * something missing says what is missing): its policies and the APIs of its access_rights; and what a
 * Policy's access_rights name that does not exist. One check for the operator (Ready condition),
 * standalone (log line) and `gw validate`; each passes how it knows what exists.
 */
import type { KeySessionT } from '../crds/schemas/access-key.js';

export type MissingReference = [reason: 'PolicyNotFound' | 'PolicyInactive' | 'ApiNotFound', message: string];

export function missingKeyReferences(
  session: KeySessionT,
  namespace: string,
  hasPolicy: (name: string) => boolean,
  hasApi: (apiId: string) => boolean,
): MissingReference[] {
  const missing: MissingReference[] = [];
  const policies = (session.apply_policies ?? []).filter((p) => !hasPolicy(p));
  if (policies.length)
    missing.push(['PolicyNotFound', `policy not found in namespace ${namespace}: ${policies.join(', ')}`]);
  const apis = Object.keys(session.access_rights ?? {}).filter((a) => !hasApi(a));
  if (apis.length)
    missing.push(['ApiNotFound', `access_rights name API(s) not found in namespace ${namespace}: ${apis.join(', ')}`]);
  return missing;
}

/** A key's policies that exist with `active: false`: the gateway refuses the key (fail closed). */
export function inactivePolicyReference(namespace: string, inactive: readonly string[]): MissingReference | undefined {
  return inactive.length
    ? [
        'PolicyInactive',
        `policy inactive in namespace ${namespace} (active: false; the key is refused): ${inactive.join(', ')}`,
      ]
    : undefined;
}

/** The APIs a Policy's access_rights name that do not exist, sorted (its Ready condition: ApiNotFound). */
export function missingPolicyApis(
  accessRights: Readonly<Record<string, unknown>> | undefined,
  namespace: string,
  hasApi: (apiId: string) => boolean,
): MissingReference | undefined {
  const missing = Object.keys(accessRights ?? {})
    .filter((id) => !hasApi(id))
    .sort();
  return missing.length
    ? ['ApiNotFound', `access_rights name API(s) not found in namespace ${namespace}: ${missing.join(', ')}`]
    : undefined;
}
