/**
 * What a standalone AccessKey or OAuthClient refers to that the manifests directory lacks (docs/contract.md#resources: a
 * resource that refers to something missing says what is missing). In a cluster the operator writes it
 * into the resource's Ready condition; standalone has no status, so it is logged (state.ts).
 */
import { apiIdOf } from '../crds/schemas/api-definition.js';
import type { AccessKey, OAuthClient } from '../crds/kinds.js';
import type { KeySessionT } from '../crds/schemas/access-key.js';
import { missingKeyReferences } from '../compiler/key-references.js';
import { sessionOf } from '../compiler/key-sessions.js';
import type { ResourceSnapshot } from '../compiler/snapshot.js';
import type { Yielder } from '../lib/yielder.js';

/** What exists, as `namespace/api_id` and `namespace/policy`: built once per snapshot. */
export interface ReferenceIndex {
  apis: Set<string>;
  policies: Set<string>;
}

export function referenceIndex(s: ResourceSnapshot): ReferenceIndex {
  return {
    apis: new Set(s.apis.map((a) => `${a.metadata.namespace}/${apiIdOf(a)}`)),
    policies: new Set(s.policies.map((p) => `${p.metadata.namespace}/${p.metadata.name}`)),
  };
}

/** referenceIndex in slices that let requests through (a directory of thousands of APIs). */
export async function referenceIndexSliced(s: ResourceSnapshot, y: Yielder): Promise<ReferenceIndex> {
  const apis = new Set<string>();
  for (let i = 0; i < s.apis.length; i++) {
    if ((i & 511) === 0) await y.maybe();
    const a = s.apis[i]!;
    apis.add(`${a.metadata.namespace}/${apiIdOf(a)}`);
  }
  const policies = new Set<string>();
  for (let i = 0; i < s.policies.length; i++) {
    if ((i & 511) === 0) await y.maybe();
    const p = s.policies[i]!;
    policies.add(`${p.metadata.namespace}/${p.metadata.name}`);
  }
  return { apis, policies };
}

/**
 * One line naming the missing references of a resource, or undefined when nothing is missing. `session`:
 * an AccessKey's session when the caller has it already.
 */
export function missingReferences(
  r: AccessKey | OAuthClient,
  index: ReferenceIndex,
  session?: KeySessionT,
): string | undefined {
  const ns = r.metadata.namespace;
  const hasApi = (id: string): boolean => index.apis.has(`${ns}/${id}`);
  const hasPolicy = (name: string): boolean => index.policies.has(`${ns}/${name}`);
  const missing: string[] = [];
  if (r.kind === 'AccessKey') {
    for (const [, message] of missingKeyReferences(session ?? sessionOf(r).session, ns, hasPolicy, hasApi))
      missing.push(message);
  } else {
    if (!hasApi(r.spec.api_id)) missing.push(`API not found in namespace ${ns}: ${r.spec.api_id}`);
    if (r.spec.policy_id && !hasPolicy(r.spec.policy_id))
      missing.push(`policy not found in namespace ${ns}: ${r.spec.policy_id}`);
  }
  return missing.length ? missing.join('; ') : undefined;
}
