/**
 * What a standalone AccessKey or OAuthClient refers to that the manifests directory lacks (SPEC.md §2: a
 * resource that refers to something missing says what is missing). In a cluster the operator writes it
 * into the resource's Ready condition; standalone has no status, so it is logged (state.ts).
 */
import { apiIdOf } from '../../crds/schemas/api-definition.js';
import type { AccessKey, OAuthClient } from '../../crds/kinds.js';
import type { ResourceSnapshot } from '../sources/snapshot.js';

/** One line naming the missing references of a resource, or undefined when nothing is missing. */
export function missingReferences(r: AccessKey | OAuthClient, s: ResourceSnapshot): string | undefined {
  const ns = r.metadata.namespace;
  const apiIds = new Set(s.apis.filter((a) => a.metadata.namespace === ns).map(apiIdOf));
  const policies = new Set(s.policies.filter((p) => p.metadata.namespace === ns).map((p) => p.metadata.name));
  const missing: string[] = [];
  if (r.kind === 'AccessKey') {
    const named = r.spec.apply_policies?.length ? r.spec.apply_policies : r.spec.apply_policy_id ? [r.spec.apply_policy_id] : [];
    const lostPolicies = named.filter((p) => !policies.has(p));
    if (lostPolicies.length) missing.push(`policy not found in namespace ${ns}: ${lostPolicies.join(', ')}`);
    const lostApis = Object.keys(r.spec.access_rights ?? {}).filter((a) => !apiIds.has(a));
    if (lostApis.length) missing.push(`access_rights name API(s) not found in namespace ${ns}: ${lostApis.join(', ')}`);
  } else {
    if (!apiIds.has(r.spec.api_id)) missing.push(`API not found in namespace ${ns}: ${r.spec.api_id}`);
    if (r.spec.policy_id && !policies.has(r.spec.policy_id)) missing.push(`policy not found in namespace ${ns}: ${r.spec.policy_id}`);
  }
  return missing.length ? missing.join('; ') : undefined;
}
