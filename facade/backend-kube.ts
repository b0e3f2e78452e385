/**
 * Cluster backend: facade writes become custom resources (AccessKey, OAuthClient) plus a client secret's
 * key in the one Secret of client secrets the chart creates (FACADE_CLIENT_SECRETS), and the facade answers once the controller has reconciled them (status.observedGeneration
 * caught up with metadata.generation, seen on a watch of the written object), or after readyTimeoutMs.
 * Keys are found by spec.key_hash (one GET for facade-made keys, see findKey). All API calls go through
 * lib/kube (the operator's and sidecar's client).
 */
import { pino } from 'pino';
import { z } from 'zod';
import { Status } from '../crds/schemas/common.js';
import { AccessKeyStatus } from '../crds/schemas/access-key.js';
import {
  AccessKeyObject,
  API_VERSION,
  ApiDefinitionResource,
  GROUP,
  OAuthClientResource,
  VERSION,
  type AccessKey,
  type OAuthClient,
  guarded,
} from '../crds/kinds.js';
import { codeOf, resourcePath, type KubeApi } from '../lib/kube/api.js';
import { SECRET_LABEL } from '../contract/annotations.js';
import type { ResourceRef } from '../lib/kube/informer.js';
import { waitForObject } from '../lib/kube/wait.js';
import type { Logger } from '../lib/logger.js';
import { apiIdOf } from '../crds/schemas/api-definition.js';
import {
  FACADE_CLIENT_SECRETS,
  MAX_SECRET_DATA_BYTES,
  SetupError,
  TooLargeError,
  keyResourceName,
  NotReadyError,
  MANAGED_BY_LABEL,
  QUOTA_RESET_ANNOTATION,
  SUPPRESS_RESET_ANNOTATION,
  type ApiRef,
  type ClientRecord,
  type KeyRecord,
  type QuotaState,
  type ResourceBackend,
} from './backend.js';
const { randomUUID } = process.getBuiltinModule('node:crypto');

export interface KubeBackendOptions {
  api: KubeApi;
  /** Only this namespace is read (APIs, keys, clients); undefined = all namespaces. */
  namespace?: string;
  quota?: (keyHash: string) => Promise<QuotaState | undefined>;
  /** How long a write waits for the controller to report it Ready (default 10 s); then NotReadyError (504). */
  readyTimeoutMs?: number;
  logger?: Logger;
}

type Plural = 'apidefinitions' | 'policies' | 'accesskeys' | 'oauthclients';

const KIND_OF: Record<Plural, string> = {
  apidefinitions: 'ApiDefinition',
  policies: 'Policy',
  accesskeys: 'AccessKey',
  oauthclients: 'OAuthClient',
};
const ref = (plural: Plural): ResourceRef => ({ group: GROUP, version: VERSION, plural, kind: KIND_OF[plural] });
const SECRETS: ResourceRef = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' };

/** The parts of a Secret the facade reads. */
const SecretState = z.looseObject({
  metadata: z
    .looseObject({
      resourceVersion: z.string().optional(),
      labels: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
  data: z.record(z.string(), z.string()).optional(),
  stringData: z.record(z.string(), z.string()).optional(),
});
type SecretState = z.infer<typeof SecretState>;
/** The API server's answer to a create or replace: the generation the controller must observe. */
const Written = z.looseObject({ metadata: z.looseObject({ generation: z.number().int().optional() }).optional() });
const ItemList = z.looseObject({ items: z.array(z.unknown()).nullish() });

/** The part of a written resource the wait reads. */
const ReconcileState = z.object({ status: Status.optional() });
/** status.quotaReset of an AccessKey: the last gw.io/quota-reset token the controller acted on. */
const QuotaResetState = z.looseObject({ status: AccessKeyStatus.pick({ quotaReset: true }).optional() });

const PolicyActive = z.looseObject({ spec: z.looseObject({ active: z.boolean().optional() }).optional() });
const Terminating = z.looseObject({ metadata: z.looseObject({ deletionTimestamp: z.string().optional() }) });
/** An AccessKey with the hash the controller recorded for a key kept in a Secret (status.keyHash). */
const AccessKeyWithHash = guarded(
  AccessKeyObject.extend({ status: AccessKeyStatus.pick({ keyHash: true }).optional() }),
);
type AccessKeyWithHash = z.infer<typeof AccessKeyWithHash>;
const hashOf = (k: AccessKeyWithHash): string | undefined => k.spec.key_hash ?? k.status?.keyHash;
/** Marked for deletion, waiting for the controller's finalizer (session / client record cleanup). */
const terminating = (obj: unknown): boolean =>
  Terminating.safeParse(obj).data?.metadata.deletionTimestamp !== undefined;

/** Besides Ready for the generation: what else the controller must have reported (and why it counts as not reconciled yet). */
interface WaitAlso {
  done: (obj: unknown) => boolean;
  why: string;
}

/** The metadata of a stored resource that a replace must carry over. */
interface CurrentMeta {
  resourceVersion?: string;
  finalizers?: string[];
  ownerReferences?: unknown[];
}

/** The answer, or undefined for a 404 (no such object). */
async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (e) {
    if (codeOf(e) === 404) return undefined;
    throw e;
  }
}

export class KubeBackend implements ResourceBackend {
  private readonly api: KubeApi;
  private readonly logger: Logger;

  constructor(private readonly opts: KubeBackendOptions) {
    this.api = opts.api;
    this.logger = opts.logger ?? pino({ level: 'silent' });
  }

  private async list<S extends z.ZodType>(plural: Plural, schema: S, labelSelector?: string): Promise<z.infer<S>[]> {
    const res = ItemList.parse(await this.api.get(resourcePath(ref(plural), this.opts.namespace), { labelSelector }));
    const out: z.infer<S>[] = [];
    for (const item of res.items ?? []) {
      const r = schema.safeParse(item);
      if (r.success) out.push(r.data);
    }
    return out;
  }

  private get(plural: Plural, namespace: string, name: string): Promise<unknown> {
    return orUndefined(this.api.get(resourcePath(ref(plural), namespace, name)));
  }

  private async readSecret(namespace: string, name: string): Promise<SecretState | undefined> {
    const raw = await orUndefined(this.api.get(resourcePath(SECRETS, namespace, name)));
    return raw === undefined ? undefined : SecretState.parse(raw);
  }

  /** Create, or replace keeping resourceVersion; then wait for the controller. */
  private async upsert(plural: Plural, resource: AccessKey | OAuthClient, also?: WaitAlso): Promise<void> {
    const { namespace, name } = resource.metadata;
    let written: z.infer<typeof Written> | undefined;
    // Several facade replicas may write one resource at once (the per-process lock does not span them):
    // a 409 (created meanwhile / resourceVersion moved) re-reads and writes again, a few times.
    for (let attempt = 1; written === undefined; attempt++) {
      let current = (await this.get(plural, namespace, name)) as { metadata?: CurrentMeta } | undefined;
      if (current && terminating(current)) {
        // Deleted a moment ago (e.g. DELETE then POST of the same key): replacing it would be lost when
        // the finalizer completes. Wait until it is gone, then create it anew.
        await this.waitGone(plural, namespace, name);
        current = undefined;
      }
      try {
        if (current) {
          // A replace keeps what others put in metadata: the controller's finalizer (its cleanup on
          // deletion) and owner references.
          const kept = {
            ...(current.metadata?.finalizers ? { finalizers: current.metadata.finalizers } : {}),
            ...(current.metadata?.ownerReferences ? { ownerReferences: current.metadata.ownerReferences } : {}),
          };
          const body = {
            ...resource,
            metadata: { ...kept, ...resource.metadata, resourceVersion: current.metadata?.resourceVersion },
          };
          written = Written.parse(await this.api.put(resourcePath(ref(plural), namespace, name), body));
        } else {
          written = Written.parse(await this.api.post(resourcePath(ref(plural), namespace), resource));
        }
      } catch (e) {
        if (codeOf(e) !== 409 || attempt >= 5) throw e;
      }
    }
    await this.waitReconciled(plural, namespace, name, written?.metadata?.generation ?? 1, also);
  }

  /** Watches the object until `done` holds for it (undefined: gone) (→ true) or readyTimeoutMs passes (→ false). */
  private waitUntil(
    plural: Plural,
    namespace: string,
    name: string,
    done: (obj: unknown) => boolean,
  ): Promise<boolean> {
    return waitForObject({
      api: this.api,
      resource: ref(plural),
      namespace,
      name,
      done,
      timeoutMs: this.opts.readyTimeoutMs ?? 10_000,
      logger: this.logger,
    });
  }

  private get readyTimeoutS(): number {
    return (this.opts.readyTimeoutMs ?? 10_000) / 1000;
  }

  /**
   * Ready = the controller observed this generation (status.observedGeneration ≥ generation) and its
   * Ready condition, when it sets one, is not "False". Past readyTimeoutMs: NotReadyError (→ 504).
   */
  private async waitReconciled(
    plural: Plural,
    namespace: string,
    name: string,
    generation: number,
    also?: WaitAlso,
  ): Promise<void> {
    let why = 'the controller has not reconciled it yet';
    const done = await this.waitUntil(plural, namespace, name, (obj) => {
      if (obj === undefined) return true; // deleted meanwhile: nothing left to wait for
      const r = ReconcileState.safeParse(obj);
      const st = r.success ? r.data.status : undefined; // a status the schema does not know counts as not reconciled
      const ready = st?.conditions?.find((c) => c.type === 'Ready');
      if ((st?.observedGeneration ?? 0) < generation) return false;
      if (ready?.status === 'False') {
        why = `the controller reports Ready=False${ready.reason ? ` (${ready.reason})` : ''}${ready.message ? `: ${ready.message}` : ''}`;
        return false;
      }
      if (!also || also.done(obj)) return true;
      why = also.why;
      return false;
    });
    if (done) return;
    this.logger.warn(
      { resource: `${plural}/${namespace}/${name}`, why },
      'controller did not report the resource Ready in time',
    );
    throw new NotReadyError(
      `${KIND_OF[plural]} ${namespace}/${name} was written and exists, but is not Ready after ${this.readyTimeoutS} s: ${why}; it takes effect once reconciled (repeating the request is safe)`,
    );
  }

  /**
   * After a DELETE: waits until the resource is gone, i.e. the controller ran its finalizer (a key's
   * session and counters, a client's record are out of Redis). Past readyTimeoutMs: NotReadyError (→ 504).
   */
  private async waitGone(plural: Plural, namespace: string, name: string): Promise<void> {
    if (await this.waitUntil(plural, namespace, name, (obj) => obj === undefined)) return;
    this.logger.warn({ resource: `${plural}/${namespace}/${name}` }, 'controller did not finish a deletion in time');
    throw new NotReadyError(
      `${KIND_OF[plural]} ${namespace}/${name} is being deleted, but still exists after ${this.readyTimeoutS} s: the controller has not finished its cleanup yet; it is removed once reconciled (repeating the request is safe)`,
    );
  }

  async getApi(namespace: string | undefined, apiId: string): Promise<ApiRef | undefined> {
    const apis = await this.list('apidefinitions', ApiDefinitionResource);
    const a = apis.find((x) => (namespace === undefined || x.metadata.namespace === namespace) && apiIdOf(x) === apiId);
    return a && { namespace: a.metadata.namespace, name: a.metadata.name, apiId };
  }

  async missingApis(namespace: string, apiIds: string[]): Promise<string[]> {
    if (apiIds.length === 0) return [];
    const present = new Set(
      (await this.list('apidefinitions', ApiDefinitionResource))
        .filter((x) => x.metadata.namespace === namespace)
        .map(apiIdOf),
    );
    return apiIds.filter((id) => !present.has(id));
  }

  async getPolicy(
    namespace: string,
    name: string,
  ): Promise<{ namespace: string; name: string; active: boolean } | undefined> {
    const raw = await this.get('policies', namespace, name);
    if (!raw) return undefined;
    return { namespace, name, active: PolicyActive.safeParse(raw).data?.spec?.active !== false };
  }

  /**
   * The AccessKey whose key hashes to keyHash: spec.key_hash, or for a key kept in a Secret (secretRef,
   * e.g. applied with kubectl) the status.keyHash the controller recorded. Facade-made keys are named after the hash
   * (keyResourceName) in the facade's namespace: one GET. When that misses (a hand-written AccessKey
   * with key_hash under a name of its own, or no such key) the scan covers only resources that are not
   * facade-made (server-side label selector), so its cost does not grow with the keys the facade
   * imported. Without a namespace (all namespaces) the whole list is scanned, as before.
   */
  private async findKey(keyHash: string, opts: { terminating?: boolean } = {}): Promise<AccessKeyWithHash | undefined> {
    const match = (k: AccessKeyWithHash): boolean =>
      hashOf(k) === keyHash && (opts.terminating === true || !terminating(k));
    const ns = this.opts.namespace;
    if (ns === undefined) return (await this.list('accesskeys', AccessKeyWithHash)).find(match);
    const direct = AccessKeyWithHash.safeParse(await this.get('accesskeys', ns, keyResourceName(keyHash)));
    if (direct.success && match(direct.data)) return direct.data;
    const [labelKey, labelValue] = Object.entries(MANAGED_BY_LABEL)[0]!;
    return (await this.list('accesskeys', AccessKeyWithHash, `${labelKey}!=${labelValue}`)).find(match);
  }

  async getKey(keyHash: string): Promise<KeyRecord | undefined> {
    const k = await this.findKey(keyHash);
    if (!k) return undefined;
    const { key_hash: _h, secretRef: _s, ...spec } = k.spec;
    return {
      namespace: k.metadata.namespace,
      name: k.metadata.name,
      spec,
      suppressReset: k.metadata.annotations?.[SUPPRESS_RESET_ANNOTATION] === 'true',
    };
  }

  async putKey(keyHash: string, record: KeyRecord): Promise<void> {
    const existing = await this.findKey(keyHash);
    const namespace = existing?.metadata.namespace ?? record.namespace;
    const name = existing?.metadata.name ?? keyResourceName(keyHash);
    const annotations = { ...(existing?.metadata.annotations ?? {}) };
    delete annotations[SUPPRESS_RESET_ANNOTATION];
    delete annotations[QUOTA_RESET_ANNOTATION];
    // Without suppress_reset every write resets the live quota (docs/contract.md#quotas), also when the key existed:
    // a fresh token asks the controller to, and the answer waits until it reports having done it.
    const resetToken = record.suppressReset ? undefined : randomUUID();
    if (record.suppressReset) annotations[SUPPRESS_RESET_ANNOTATION] = 'true';
    else annotations[QUOTA_RESET_ANNOTATION] = resetToken!;
    await this.upsert(
      'accesskeys',
      {
        apiVersion: API_VERSION,
        kind: 'AccessKey',
        metadata: {
          name,
          namespace,
          labels: existing ? { ...(existing.metadata.labels ?? {}) } : { ...MANAGED_BY_LABEL },
          annotations,
        },
        // a key kept in a Secret stays there (its manifest, e.g. kubectl's, still names the Secret)
        spec: existing?.spec.secretRef
          ? { ...record.spec, secretRef: existing.spec.secretRef }
          : { ...record.spec, key_hash: keyHash },
      },
      resetToken === undefined
        ? undefined
        : {
            done: (obj) => QuotaResetState.safeParse(obj).data?.status?.quotaReset === resetToken,
            why: 'the controller has not reset its quota yet',
          },
    );
  }

  /** Resolves once the AccessKey is gone (its session removed by the controller's finalizer), or NotReadyError. */
  async deleteKey(keyHash: string): Promise<boolean> {
    const k = await this.findKey(keyHash, { terminating: true }); // a timed-out earlier DELETE is waited for again
    if (!k) return false;
    const { namespace, name } = k.metadata;
    await orUndefined(this.api.delete(resourcePath(ref('accesskeys'), namespace, name)));
    await this.waitGone('accesskeys', namespace, name);
    return true;
  }

  async listKeys(): Promise<string[]> {
    const hashes = (await this.list('accesskeys', AccessKeyWithHash)).flatMap((k) => {
      const h = hashOf(k);
      return h && !terminating(k) ? [h] : [];
    });
    return [...new Set(hashes)].sort();
  }

  async quota(keyHash: string): Promise<QuotaState | undefined> {
    return this.opts.quota?.(keyHash);
  }

  /**
   * A client's secret: from the facade's shared Secret, or from the Secret a client applied by hand names,
   * which the facade's Role does not reach (403) in a cluster installed by the chart: then not shown.
   * `shared`: the shared Secrets read so far for a list, by namespace.
   */
  private async secretOf(c: OAuthClient, shared?: Map<string, SecretState | undefined>): Promise<string | undefined> {
    const { name, key } = c.spec.secretRef;
    const ns = c.metadata.namespace;
    let s: SecretState | undefined;
    if (name === FACADE_CLIENT_SECRETS && shared?.has(ns)) s = shared.get(ns);
    else
      try {
        s = await this.readSecret(ns, name);
        if (name === FACADE_CLIENT_SECRETS) shared?.set(ns, s);
      } catch (e) {
        if (codeOf(e) === 403) return undefined;
        throw e;
      }
    const d = s?.data?.[key];
    return s?.stringData?.[key] ?? (d === undefined ? undefined : Buffer.from(d, 'base64').toString('utf8'));
  }

  /**
   * Sets (or with undefined removes) one client's key in the Secret of client secrets of `namespace`. The
   * chart creates that Secret and the facade only replaces it (get + update by name: its Role has no Secret
   * create, docs/helm.md "RBAC"): missing, or without the controller's watch label, the write is refused
   * with what to create (SetupError → 503). The replace keeps the Secret's metadata (the chart's labels and
   * Helm's ownership annotations) and changes only `data`; a 409 (another replica wrote meanwhile) re-reads
   * and writes again.
   */
  private async setClientSecret(namespace: string, key: string, value: string | undefined): Promise<void> {
    const what = `Secret ${namespace}/${FACADE_CLIENT_SECRETS}`;
    const howTo = `the chart creates it in facade.namespace; without the chart: kubectl -n ${namespace} create secret generic ${FACADE_CLIENT_SECRETS} && kubectl -n ${namespace} label secret ${FACADE_CLIENT_SECRETS} ${SECRET_LABEL}=true`;
    for (let attempt = 1; ; attempt++) {
      // looseObject: everything else of the Secret (annotations, ownerReferences, type) is kept for the replace
      const current = await this.readSecret(namespace, FACADE_CLIENT_SECRETS);
      if (current === undefined) {
        if (value === undefined) return; // nothing to remove
        throw new SetupError(`${what}, which holds the OAuth client secrets, does not exist (${howTo})`);
      }
      // the label the controller's Secret informer selects: without it a changed secret would reach the
      // controller only at its next resync (docs/operator.md "Which Secrets the controller reads")
      if (current.metadata?.labels?.[SECRET_LABEL] === undefined)
        throw new SetupError(`${what} has no label ${SECRET_LABEL} (${howTo})`);
      const data: Record<string, string> = { ...(current.data ?? {}) };
      if (value === undefined) {
        if (!(key in data)) return;
        delete data[key];
      } else data[key] = Buffer.from(value, 'utf8').toString('base64');
      const bytes = Object.entries(data).reduce((n, [k, v]) => n + k.length + v.length, 0);
      if (value !== undefined && bytes > MAX_SECRET_DATA_BYTES)
        throw new TooLargeError(
          `the client's secret would take ${what} over ${MAX_SECRET_DATA_BYTES} bytes of data (a Secret holds at most 1 MiB; docs/helm.md "RBAC" states how many clients that is): delete clients of this namespace first`,
        );
      const { managedFields: _m, ...metadata } = current.metadata ?? {};
      const { stringData: _s, ...rest } = current;
      try {
        await this.api.put(resourcePath(SECRETS, namespace, FACADE_CLIENT_SECRETS), { ...rest, metadata, data });
        return;
      } catch (e) {
        if (codeOf(e) !== 409 || attempt >= 10) throw e;
      }
    }
  }

  async listClients(apiId: string): Promise<ClientRecord[]> {
    const clients = (await this.list('oauthclients', OAuthClientResource)).filter(
      (c) => c.spec.api_id === apiId && !terminating(c),
    );
    const out: ClientRecord[] = [];
    // each namespace's shared Secret read once for the list (the facade's clients all name it)
    const shared = new Map<string, SecretState | undefined>();
    for (const c of clients)
      out.push({
        namespace: c.metadata.namespace,
        name: c.metadata.name,
        spec: c.spec,
        secret: await this.secretOf(c, shared),
      });
    return out.sort((a, b) => a.spec.client_id.localeCompare(b.spec.client_id));
  }

  /** One client of an API (a deleting one only with `terminating`), found without reading the others' Secrets. */
  private async findClient(
    apiId: string,
    clientId: string,
    opts: { terminating?: boolean } = {},
  ): Promise<OAuthClient | undefined> {
    return (await this.list('oauthclients', OAuthClientResource)).find(
      (c) => c.spec.api_id === apiId && c.spec.client_id === clientId && (opts.terminating === true || !terminating(c)),
    );
  }

  async getClient(apiId: string, clientId: string): Promise<ClientRecord | undefined> {
    const c = await this.findClient(apiId, clientId);
    return (
      c && { namespace: c.metadata.namespace, name: c.metadata.name, spec: c.spec, secret: await this.secretOf(c) }
    );
  }

  async putClient(record: ClientRecord & { secret: string }): Promise<void> {
    // in a cluster the secret goes into the facade's one Secret, keyed by the client's resource name
    const spec = { ...record.spec, secretRef: { name: FACADE_CLIENT_SECRETS, key: record.name } };
    await this.setClientSecret(record.namespace, record.name, record.secret);
    await this.upsert('oauthclients', {
      apiVersion: API_VERSION,
      kind: 'OAuthClient',
      metadata: { name: record.name, namespace: record.namespace, labels: { ...MANAGED_BY_LABEL } },
      spec,
    });
  }

  async deleteClient(apiId: string, clientId: string): Promise<boolean> {
    const c = await this.findClient(apiId, clientId, { terminating: true }); // a timed-out earlier DELETE is finished
    if (!c) return false;
    const { namespace, name } = c.metadata;
    await orUndefined(this.api.delete(resourcePath(ref('oauthclients'), namespace, name)));
    await this.waitGone('oauthclients', namespace, name); // the controller removed the client's Redis record
    // its key in the facade's Secret; a Secret of a client applied by hand is left to whoever made it
    if (c.spec.secretRef.name === FACADE_CLIENT_SECRETS)
      await this.setClientSecret(namespace, c.spec.secretRef.key, undefined);
    return true;
  }
}
