/**
 * What the management facade writes through. Two implementations: the standalone resources directory
 * (backend-dir.ts: YAML manifests under DIR/.gw/) and the cluster (backend-kube.ts: custom resources).
 * The facade itself never knows where resources live.
 */
import { SECRET_LABEL } from '../contract/annotations.js';
import type { KeySessionT } from '../crds/schemas/access-key.js';
import type { OAuthClientSpecT } from '../crds/schemas/oauth-client.js';
import { sha256hex } from '../lib/hash.js';

/** An API the facade can attach clients to. */
export interface ApiRef {
  namespace: string;
  /** metadata.name of the ApiDefinition. */
  name: string;
  apiId: string;
}

/** A facade-visible access key: its AccessKey resource, minus the key material (only the hash is known). */
export interface KeyRecord {
  namespace: string;
  /** metadata.name of the AccessKey. */
  name: string;
  /** The session (key body), without key_hash / secretRef. */
  spec: KeySessionT;
  /** Recorded as annotation gw.io/suppress-reset: "true": adding the key keeps its live quota. */
  suppressReset: boolean;
}

/** An OAuth client with its secret (the secret lives in a Secret, never in the OAuthClient). */
export interface ClientRecord {
  namespace: string;
  /** metadata.name of the OAuthClient. */
  name: string;
  spec: OAuthClientSpecT;
  /** undefined when the Secret is missing. */
  secret: string | undefined;
}

export interface QuotaState {
  /** The key's own quota (absent when it has none). */
  remaining?: number;
  /** Unix seconds. */
  renews?: number;
  /** Per-API quotas (access_rights[api].limit.quota_max), by api_id. */
  apis?: Record<string, { remaining: number; renews: number }>;
}

export interface ResourceBackend {
  /** The API with this api_id; within `namespace` when given, else in any namespace (first match). */
  getApi(namespace: string | undefined, apiId: string): Promise<ApiRef | undefined>;
  /** Those of `apiIds` that name no API in `namespace` (one read of the APIs, however many ids). */
  missingApis(namespace: string, apiIds: string[]): Promise<string[]>;
  /** Whether Policy `name` exists in `namespace`, and whether it is active (`active: false` → false). */
  getPolicy(namespace: string, name: string): Promise<{ namespace: string; name: string; active: boolean } | undefined>;

  getKey(keyHash: string): Promise<KeyRecord | undefined>;
  /** Create or replace; resolves when the gateway can use the key (or a timeout). */
  putKey(keyHash: string, record: KeyRecord): Promise<void>;
  /** false when no such key. */
  deleteKey(keyHash: string): Promise<boolean>;
  /** Hashes of every key (facade-made or not). */
  listKeys(): Promise<string[]>;

  getClient(apiId: string, clientId: string): Promise<ClientRecord | undefined>;
  /** Create or replace the OAuthClient and the Secret with its secret (record.spec.secretRef names it). */
  putClient(record: ClientRecord & { secret: string }): Promise<void>;
  listClients(apiId: string): Promise<ClientRecord[]>;
  /** Deletes the OAuthClient and its facade-made Secret; false when no such client. */
  deleteClient(apiId: string, clientId: string): Promise<boolean>;

  /** Live quota of a key, when the quota manager knows it. */
  quota(keyHash: string): Promise<QuotaState | undefined>;
}

/** A write the backend refuses because the resource is owned elsewhere (e.g. a hand-written manifest). → 409 */
export class ConflictError extends Error {}

/**
 * A write that was stored but that the controller did not report Ready in time (cluster). → 504, with a
 * message that says so: the resource exists and takes effect once reconciled; a retry of the same
 * write is safe (it is idempotent).
 */
export class NotReadyError extends Error {}

/** A write whose stored form would be over the size a resource may have (standalone: a manifest file's 1 MiB). → 413 */
export class TooLargeError extends Error {}

/**
 * A write the facade cannot make because something it needs was not set up for it (cluster: the Secret of
 * client secrets the chart creates is missing or not labelled for the controller). → 503, naming what to create.
 */
export class SetupError extends Error {}

export { QUOTA_RESET_ANNOTATION, SUPPRESS_RESET_ANNOTATION } from '../contract/annotations.js';
export const MANAGED_BY_LABEL = { 'app.kubernetes.io/managed-by': 'gw-facade' } as const;

/** Whether these labels mark a resource the facade made (and may replace or delete). */
export const isManaged = (labels: Record<string, string> | undefined): boolean =>
  labels?.['app.kubernetes.io/managed-by'] === MANAGED_BY_LABEL['app.kubernetes.io/managed-by'];

/** The Secret that holds a facade-made client's secret (record.spec.secretRef names it), as both backends write it. */
export function clientSecretManifest(record: ClientRecord & { secret: string }) {
  const ref = record.spec.secretRef;
  return {
    apiVersion: 'v1' as const,
    kind: 'Secret' as const,
    metadata: {
      name: ref.name,
      namespace: record.namespace,
      // the controller watches only Secrets with this label: a client secret changed here reaches it at once
      labels: { ...MANAGED_BY_LABEL, [SECRET_LABEL]: 'true' } as Record<string, string>,
    },
    type: 'Opaque',
    data: { [ref.key]: Buffer.from(record.secret, 'utf8').toString('base64') },
  };
}

/** metadata.name of a facade-imported AccessKey. */
export function keyResourceName(keyHash: string): string {
  return `key-${keyHash.slice(0, 16)}`;
}

/** metadata.name of a facade-made OAuthClient (client ids are free text, so the name is derived). */
export function clientResourceName(namespace: string, apiId: string, clientId: string): string {
  return `oauth-${sha256hex(`${namespace}\u0000${apiId}\u0000${clientId}`).slice(0, 16)}`;
}

/**
 * The one Secret of a namespace that holds the secrets of the OAuth clients `gw facade` creates, one data key
 * per client (its resource name). The chart creates it (templates/facade-client-secrets.yaml) and the facade
 * only reads and replaces it, so the facade's Role grants get/update on this name alone and no Secret create
 * (docs/helm.md "RBAC"). Standalone keeps a Secret per client (clientSecretName) under DIR/.gw/.
 */
export const FACADE_CLIENT_SECRETS = 'gw-facade-oauth-clients';
/** Data a Secret may hold: the API server refuses a Secret over 1 MiB; kept below it for metadata. */
export const MAX_SECRET_DATA_BYTES = 1_000_000;

export function clientSecretName(clientName: string): string {
  return `${clientName}-secret`;
}
