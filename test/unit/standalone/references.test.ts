/** Standalone's missing-reference report (docs/contract.md#resources): what an AccessKey or OAuthClient names that the directory lacks. */
import { parse } from 'yaml';
import { validateDocument } from '../../../standalone/manifests.js';
import type { AnyResource } from '../../../crds/kinds.js';
import { missingReferences, referenceIndex } from '../../../standalone/references.js';
import { toSnapshot } from '../../../compiler/snapshot.js';

function res(yaml: string): AnyResource {
  const v = validateDocument(parse(yaml));
  if (!v.ok) throw new Error(v.message);
  return v.resource;
}

const snapshot = toSnapshot([
  res('apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: a}\nspec: {proxy: {listen_path: /a/}}'),
  res(
    'apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: b, namespace: other}\nspec: {api_id: b-id, proxy: {listen_path: /b/}}',
  ),
  res('apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: gold}\nspec: {rate: 1, per: 1}'),
]);

test.each([
  [
    'a key whose references all exist',
    'kind: AccessKey\nmetadata: {name: k}\nspec: {key_hash: ' +
      'a'.repeat(64) +
      ', apply_policies: [gold], access_rights: {a: {api_id: a}}}',
    undefined,
  ],
  [
    'a missing policy',
    'kind: AccessKey\nmetadata: {name: k}\nspec: {key_hash: ' + 'a'.repeat(64) + ', apply_policies: [gold, silver]}',
    'policy not found in namespace default: silver',
  ],
  [
    'the deprecated apply_policy_id',
    'kind: AccessKey\nmetadata: {name: k}\nspec: {key_hash: ' + 'a'.repeat(64) + ', apply_policy_id: bronze}',
    'policy not found in namespace default: bronze',
  ],
  [
    'an API of another namespace',
    'kind: AccessKey\nmetadata: {name: k}\nspec: {key_hash: ' +
      'a'.repeat(64) +
      ', access_rights: {b-id: {api_id: b-id}}}',
    'access_rights name API(s) not found in namespace default: b-id',
  ],
  [
    'a client of a missing API and policy',
    'kind: OAuthClient\nmetadata: {name: c}\nspec: {api_id: nope, client_id: c1, policy_id: silver, secretRef: {name: s, key: secret}}',
    'API not found in namespace default: nope; policy not found in namespace default: silver',
  ],
  [
    'a client whose references exist',
    'kind: OAuthClient\nmetadata: {name: c}\nspec: {api_id: a, client_id: c1, policy_id: gold, secretRef: {name: s, key: secret}}',
    undefined,
  ],
])('%s', (_what, yaml, expected) => {
  const r = res(`apiVersion: gw.io/v1alpha1\n${yaml}`);
  if (r.kind !== 'AccessKey' && r.kind !== 'OAuthClient') throw new Error('fixture');
  expect(missingReferences(r, referenceIndex(snapshot))).toBe(expected);
});
