/**
 * What an AccessKey's session refers to that does not exist (SPEC.md §2: a resource that refers to
 * something missing says what is missing): its policies and the APIs of its access_rights. One check for
 * the operator (Ready condition) and standalone (log line); each passes how it knows what exists.
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
