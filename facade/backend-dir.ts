/**
 * Standalone backend: facade writes become YAML manifests under DIR/.gw/ (one file per resource), so
 * the directory watcher applies them like any hand-written manifest and a restart loses nothing.
 *
 * - facade-made resources carry the label app.kubernetes.io/managed-by=gw-facade and live in
 *   DIR/.gw/accesskey-<name>.yaml, DIR/.gw/oauthclient-<name>.yaml, DIR/.gw/secret-<ns>-<name>.yaml;
 *   they are read back from those files (never stale);
 * - everything else (APIs, policies, hand-written keys and clients) comes from the injected snapshot
 *   function. Hand-written keys/clients are readable through the facade but not writable (ConflictError).
 * File I/O is synchronous on purpose: each operation is atomic with respect to the others. A write hands
 * the files it changed to onWrite, which applies just those (not a re-read of the directory).
 */
import { parse, stringify } from 'yaml';
import {
  AccessKeyResource,
  API_VERSION,
  OAuthClientResource,
  SecretResource,
  secretValue,
  type AccessKey,
  type OAuthClient,
  type Secret,
} from '../crds/kinds.js';
import { keyMaterial, keysByHash, sessionOf, snapshotSecrets } from '../compiler/key-sessions.js';
import { findSecret, type ResourceSnapshot } from '../compiler/snapshot.js';
import { facadeJson, MAX_MANIFEST_BYTES, readManifestFile, WRITTEN_BY_FACADE } from '../lib/manifest-read.js';
import { apiIdOf } from '../crds/schemas/api-definition.js';
import {
  clientSecretManifest,
  ConflictError,
  TooLargeError,
  isManaged,
  keyResourceName,
  MANAGED_BY_LABEL,
  SUPPRESS_RESET_ANNOTATION,
  type ApiRef,
  type ClientRecord,
  type KeyRecord,
  type QuotaState,
  type ResourceBackend,
} from './backend.js';
const { existsSync, mkdirSync, readdirSync, renameSync, unlinkSync, writeFileSync } =
  process.getBuiltinModule('node:fs');
const { join, relative } = process.getBuiltinModule('node:path');

export interface DirBackendOptions {
  /** The standalone resources directory (facade files go to DIR/.gw/). */
  dir: string;
  /** The current validated resources of DIR (the standalone loader's DirSource.current). */
  snapshot: () => ResourceSnapshot;
  /**
   * The AccessKey of each key hash of a snapshot, when kept up to date elsewhere (StandaloneState.keysOf);
   * undefined, or absent: the snapshot's keys are indexed here (compiler/key-sessions.ts keysByHash).
   */
  keyIndex?: (snapshot: ResourceSnapshot) => { get(keyHash: string): AccessKey | undefined } | undefined;
  /** Live quota values (the standalone quota manager); absent → GET /gw/keys shows the stored values. */
  quota?: (keyHash: string) => Promise<QuotaState | undefined>;
  /**
   * Called after every write with the files written or removed (relative to DIR), so the change applies
   * at once and nothing else is re-read (DirSource.changed).
   */
  onWrite?: (files: string[]) => unknown;
  /**
   * The resources re-read when a file changed since the last read (DirSource.refresh): a reference
   * check that misses tries it once, so a manifest written a moment before the request (before the
   * directory watch fired) is found.
   */
  refresh?: () => ResourceSnapshot | Promise<ResourceSnapshot>;
}

export class DirBackend implements ResourceBackend {
  readonly gwDir: string;

  constructor(private readonly opts: DirBackendOptions) {
    this.gwDir = join(opts.dir, '.gw');
  }

  /** A resource found in the snapshot, or else in the directory re-read when it changed since. */
  private async lookup<T>(find: (s: ResourceSnapshot) => T | undefined): Promise<T | undefined> {
    return find(this.opts.snapshot()) ?? (this.opts.refresh ? find(await this.opts.refresh()) : undefined);
  }

  /** The files changed, relative to DIR, handed to onWrite. */
  private async written(...files: string[]): Promise<void> {
    await this.opts.onWrite?.(files.map((f) => relative(this.opts.dir, f)));
  }

  async getApi(namespace: string | undefined, apiId: string): Promise<ApiRef | undefined> {
    const api = await this.lookup((s) =>
      s.apis.find((a) => (namespace === undefined || a.metadata.namespace === namespace) && apiIdOf(a) === apiId),
    );
    return api && { namespace: api.metadata.namespace, name: api.metadata.name, apiId };
  }

  async missingApis(namespace: string, apiIds: string[]): Promise<string[]> {
    const missing: string[] = [];
    for (const id of apiIds) if (!(await this.getApi(namespace, id))) missing.push(id);
    return missing;
  }

  async getPolicy(
    namespace: string,
    name: string,
  ): Promise<{ namespace: string; name: string; active: boolean } | undefined> {
    const p = await this.lookup((s) =>
      s.policies.find((x) => x.metadata.namespace === namespace && x.metadata.name === name),
    );
    return p && { namespace, name, active: p.spec.active !== false };
  }

  // ---- keys ----

  async getKey(keyHash: string): Promise<KeyRecord | undefined> {
    const own = this.readOwnKey(keyHash);
    if (own) return toKeyRecord(own);
    const other = this.foreignKey(keyHash);
    return other && toKeyRecord(other);
  }

  async putKey(keyHash: string, record: KeyRecord): Promise<void> {
    const other = this.foreignKey(keyHash);
    if (other)
      throw new ConflictError(
        `key is defined by AccessKey ${other.metadata.namespace}/${other.metadata.name} in a hand-written manifest; edit it there`,
      );
    const name = keyResourceName(keyHash);
    const existing = this.readFile(this.keyFile(name), AccessKeyResource);
    if (existing && existing.spec.key_hash !== keyHash)
      throw new ConflictError(`AccessKey ${name} already holds another key`);
    const resource: AccessKey = {
      apiVersion: API_VERSION,
      kind: 'AccessKey',
      metadata: {
        name,
        namespace: record.namespace,
        labels: { ...MANAGED_BY_LABEL },
        ...(record.suppressReset ? { annotations: { [SUPPRESS_RESET_ANNOTATION]: 'true' } } : {}),
      },
      spec: { ...record.spec, key_hash: keyHash },
    };
    this.writeFile(this.keyFile(name), manifestText(resource, `the key`));
    await this.written(this.keyFile(name));
  }

  async deleteKey(keyHash: string): Promise<boolean> {
    if (this.readOwnKey(keyHash)) {
      this.removeFile(this.keyFile(keyResourceName(keyHash)));
      await this.written(this.keyFile(keyResourceName(keyHash)));
      return true;
    }
    const other = this.foreignKey(keyHash);
    if (other)
      throw new ConflictError(
        `key is defined by AccessKey ${other.metadata.namespace}/${other.metadata.name} in a hand-written manifest; delete it there`,
      );
    return false;
  }

  async listKeys(): Promise<string[]> {
    const out = new Set<string>();
    for (const k of this.ownFiles('accesskey-', AccessKeyResource)) if (k.spec.key_hash) out.add(k.spec.key_hash);
    const snap = this.opts.snapshot();
    const secrets = snapshotSecrets(snap);
    for (const k of snap.keys) {
      if (isManaged(k.metadata.labels)) continue;
      const m = keyMaterial(k, secrets);
      if (m.ok) out.add(m.keyHash);
    }
    return [...out].sort();
  }

  async quota(keyHash: string): Promise<QuotaState | undefined> {
    return this.opts.quota?.(keyHash);
  }

  // ---- OAuth clients ----

  async getClient(apiId: string, clientId: string): Promise<ClientRecord | undefined> {
    return (await this.listClients(apiId)).find((c) => c.spec.client_id === clientId);
  }

  async putClient(record: ClientRecord & { secret: string }): Promise<void> {
    const foreign = this.foreignClients(record.spec.api_id).find((c) => c.spec.client_id === record.spec.client_id);
    if (foreign)
      throw new ConflictError(
        `client is defined by OAuthClient ${foreign.metadata.namespace}/${foreign.metadata.name} in a hand-written manifest`,
      );
    const ref = record.spec.secretRef;
    const secret: Secret = clientSecretManifest(record);
    const client: OAuthClient = {
      apiVersion: API_VERSION,
      kind: 'OAuthClient',
      metadata: { name: record.name, namespace: record.namespace, labels: { ...MANAGED_BY_LABEL } },
      spec: record.spec,
    };
    const clientText = manifestText(client, 'the client');
    // The Secret first: the client never refers to a missing Secret.
    this.writeFile(this.secretFile(record.namespace, ref.name), manifestText(secret, 'the client secret'), 0o600);
    this.writeFile(this.clientFile(record.name), clientText);
    await this.written(this.secretFile(record.namespace, ref.name), this.clientFile(record.name));
  }

  async listClients(apiId: string): Promise<ClientRecord[]> {
    const out: ClientRecord[] = [];
    for (const c of this.ownFiles('oauthclient-', OAuthClientResource)) {
      if (c.spec.api_id !== apiId) continue;
      const s = this.readFile(this.secretFile(c.metadata.namespace, c.spec.secretRef.name), SecretResource);
      out.push(toClientRecord(c, s));
    }
    const snap = this.opts.snapshot();
    for (const c of this.foreignClients(apiId)) {
      out.push(toClientRecord(c, findSecret(snap, c.metadata.namespace, c.spec.secretRef.name)));
    }
    return out.sort((a, b) => a.spec.client_id.localeCompare(b.spec.client_id));
  }

  async deleteClient(apiId: string, clientId: string): Promise<boolean> {
    const own = this.ownFiles('oauthclient-', OAuthClientResource).find(
      (c) => c.spec.api_id === apiId && c.spec.client_id === clientId,
    );
    if (own) {
      this.removeFile(this.clientFile(own.metadata.name));
      const secretFile = this.secretFile(own.metadata.namespace, own.spec.secretRef.name);
      const s = this.readFile(secretFile, SecretResource);
      if (s && isManaged(s.metadata.labels)) this.removeFile(secretFile);
      await this.written(this.clientFile(own.metadata.name), secretFile);
      return true;
    }
    const foreign = this.foreignClients(apiId).find((c) => c.spec.client_id === clientId);
    if (foreign)
      throw new ConflictError(
        `client is defined by OAuthClient ${foreign.metadata.namespace}/${foreign.metadata.name} in a hand-written manifest; delete it there`,
      );
    return false;
  }

  // ---- files ----

  keyFile(name: string): string {
    return join(this.gwDir, `accesskey-${name}.yaml`);
  }
  clientFile(name: string): string {
    return join(this.gwDir, `oauthclient-${name}.yaml`);
  }
  secretFile(namespace: string, name: string): string {
    return join(this.gwDir, `secret-${namespace}-${name}.yaml`);
  }

  private readOwnKey(keyHash: string): AccessKey | undefined {
    const k = this.readFile(this.keyFile(keyResourceName(keyHash)), AccessKeyResource);
    return k && k.spec.key_hash === keyHash ? k : undefined;
  }

  /** A key with this hash from a manifest the facade did not write. */
  private foreignKey(keyHash: string): AccessKey | undefined {
    const snap = this.opts.snapshot();
    const first = (this.opts.keyIndex?.(snap) ?? keysByHash(snap)).get(keyHash);
    if (!first || !isManaged(first.metadata.labels)) return first;
    // the facade's own key holds this hash too (a duplicate the loader refuses): look past it
    const secrets = snapshotSecrets(snap);
    return snap.keys.find((k) => {
      if (isManaged(k.metadata.labels)) return false;
      const m = keyMaterial(k, secrets);
      return m.ok && m.keyHash === keyHash;
    });
  }

  private foreignClients(apiId: string): OAuthClient[] {
    return this.opts.snapshot().clients.filter((c) => !isManaged(c.metadata.labels) && c.spec.api_id === apiId);
  }

  private ownFiles<T extends { metadata: { labels?: Record<string, string> } }>(
    prefix: string,
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  ): T[] {
    if (!existsSync(this.gwDir)) return [];
    const out: T[] = [];
    for (const f of readdirSync(this.gwDir).sort()) {
      if (!f.startsWith(prefix) || !f.endsWith('.yaml')) continue;
      const r = this.readFile(join(this.gwDir, f), schema);
      if (r && isManaged(r.metadata.labels)) out.push(r);
    }
    return out;
  }

  private readFile<T>(
    file: string,
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  ): T | undefined {
    const read = readManifestFile(file); // never blocks on a FIFO, never reads a huge file
    if (!read.ok) return undefined;
    const text = read.text;
    let doc: unknown = facadeJson(text);
    try {
      doc ??= parse(text);
    } catch {
      return undefined;
    }
    const r = schema.safeParse(doc);
    return r.success ? r.data : undefined;
  }

  /** Atomic: a temp file (hidden, so the watcher skips it) renamed over the target. */
  private writeFile(file: string, text: string, mode = 0o644): void {
    mkdirSync(this.gwDir, { recursive: true });
    const tmp = join(this.gwDir, `.${Date.now()}-${Math.random().toString(36).slice(2)}.tmp`);
    writeFileSync(tmp, text, { mode });
    renameSync(tmp, file);
  }

  private removeFile(file: string): void {
    try {
      unlinkSync(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

const HEADER = WRITTEN_BY_FACADE;

/** Over this many bytes of JSON a resource is written as compact JSON without trying YAML first. */
const YAML_UP_TO = 64 * 1024;

/**
 * The manifest of a facade write, as the directory loader will read it back: YAML for a resource of
 * ordinary size; compact JSON (which is YAML too, and which the loader parses with JSON.parse) for a large
 * one, or when YAML's indentation would take it over MAX_MANIFEST_BYTES — a large meta_data array grows
 * several times in block YAML, and a YAML writer or parser takes seconds on it. Over the limit either
 * way → TooLargeError (413), so the facade never answers 200 for a write the loader would refuse.
 */
function manifestText(resource: object, what: string): string {
  const json = `${HEADER}${JSON.stringify(resource)}\n`;
  const size = Buffer.byteLength(json);
  if (size <= YAML_UP_TO) {
    const yaml = HEADER + stringify(resource);
    if (Buffer.byteLength(yaml) <= MAX_MANIFEST_BYTES) return yaml;
  }
  if (size <= MAX_MANIFEST_BYTES) return json;
  throw new TooLargeError(
    `${what} would be stored as a manifest of ${size} bytes, over the ${MAX_MANIFEST_BYTES}-byte limit of a manifest file`,
  );
}

function toKeyRecord(k: AccessKey): KeyRecord {
  return {
    namespace: k.metadata.namespace,
    name: k.metadata.name,
    spec: sessionOf(k).session,
    suppressReset: k.metadata.annotations?.[SUPPRESS_RESET_ANNOTATION] === 'true',
  };
}

function toClientRecord(c: OAuthClient, s: Secret | undefined): ClientRecord {
  return {
    namespace: c.metadata.namespace,
    name: c.metadata.name,
    spec: c.spec,
    secret: s ? secretValue(s, c.spec.secretRef.key) : undefined,
  };
}
