/** A consistent view of every resource gw knows, from a manifests directory or the API server. */
import type { AccessKey, ApiDefinition, OAuthClient, Policy, Secret, AnyResource } from '../crds/kinds.js';

export interface ResourceSnapshot {
  apis: ApiDefinition[];
  policies: Policy[];
  keys: AccessKey[];
  clients: OAuthClient[];
  secrets: Secret[];
  /** The manifest file each resource was read from (a manifests directory; absent elsewhere). */
  files?: FileOf;
}

/** The manifest file of a resource (a Map, or a lookup kept by the directory source). */
export interface FileOf {
  get(r: AnyResource): string | undefined;
}

export function emptySnapshot(): ResourceSnapshot {
  return { apis: [], policies: [], keys: [], clients: [], secrets: [] };
}

export function toSnapshot(resources: AnyResource[], files?: ReadonlyMap<AnyResource, string>): ResourceSnapshot {
  const s: ResourceSnapshot = files ? { ...emptySnapshot(), files } : emptySnapshot();
  for (const r of resources) {
    switch (r.kind) {
      case 'ApiDefinition':
        s.apis.push(r);
        break;
      case 'Policy':
        s.policies.push(r);
        break;
      case 'AccessKey':
        s.keys.push(r);
        break;
      case 'OAuthClient':
        s.clients.push(r);
        break;
      case 'Secret':
        s.secrets.push(r);
        break;
    }
  }
  return s;
}

/** Each snapshot's Secrets by namespace/name, built on first use (the first of two with one name wins). */
const secretIndex = new WeakMap<readonly Secret[], Map<string, Secret>>();

export function findSecret(s: ResourceSnapshot, namespace: string, name: string): Secret | undefined {
  let index = secretIndex.get(s.secrets);
  if (!index) {
    index = new Map();
    for (const x of s.secrets) {
      const id = `${x.metadata.namespace}/${x.metadata.name}`;
      if (!index.has(id)) index.set(id, x);
    }
    secretIndex.set(s.secrets, index);
  }
  return index.get(`${namespace}/${name}`);
}

/** `Kind namespace/name`, followed by ` (file)` when the snapshot knows the resource's manifest file. */
export function resourceLabel(s: ResourceSnapshot, r: AnyResource): string {
  const file = s.files?.get(r);
  return `${r.kind} ${r.metadata.namespace}/${r.metadata.name}${file ? ` (${file})` : ''}`;
}
