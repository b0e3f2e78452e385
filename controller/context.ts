/** What every reconciler shares: the caches, the writers, the store, and the kinds' REST names. */
import { SECRET_LABEL } from '../contract/annotations.js';
import { GROUP, SecretResource, VERSION, type Secret } from '../crds/kinds.js';
import type { Logger } from '../lib/logger.js';
import type { RedisSessionStore } from '../stores/sessions-redis.js';
import type { StoreClient } from '../lib/store/redis.js';
import type { CompiledConfig } from '../contract/config.js';
import type { EventRecorder } from './events.js';
import { KubeObjectSchema, type Informer, type KubeObject, type ResourceRef } from '../lib/kube/informer.js';
import { codeOf, resourcePath, type KubeApi } from '../lib/kube/api.js';
import type { OperatorMetrics } from './metrics.js';
import type { ApiIdIndex } from './api-index.js';
import type { KeyMemos } from './key-memo.js';
import type { SettledConfigs } from './config-settled.js';
import type { Outcome, StatusWriter } from './status.js';
import { readyCondition } from './status.js';

export const REFS = {
  ApiDefinition: { group: GROUP, version: VERSION, plural: 'apidefinitions', kind: 'ApiDefinition' },
  Policy: { group: GROUP, version: VERSION, plural: 'policies', kind: 'Policy' },
  AccessKey: { group: GROUP, version: VERSION, plural: 'accesskeys', kind: 'AccessKey' },
  OAuthClient: { group: GROUP, version: VERSION, plural: 'oauthclients', kind: 'OAuthClient' },
  Secret: { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' },
  ConfigMap: { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap' },
} as const satisfies Record<string, ResourceRef>;

export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'gw-controller' } as const;
/** The labels of a Secret the controller generates: its own, and the one its Secret informer selects. */
export const GENERATED_SECRET_LABELS = { ...MANAGED_BY, [SECRET_LABEL]: 'true' } as const;

export interface Informers {
  apis: Informer;
  policies: Informer;
  keys: Informer;
  clients: Informer;
  secrets: Informer;
  configMaps: Informer;
}

/** The statuses a Config reconcile computed, written by the ConfigStatus key (config-status.ts). */
export interface StatusPlans {
  /** `settle`: what the config reconcile wrote, made settled (config-settled.ts) once every status is written. */
  set(ns: string, outcomes: Map<KubeObject, Outcome>, settle?: (objects: Map<string, string>) => void): void;
  write(ctx: OperatorContext, ns: string): Promise<void>;
}

export interface OperatorContext {
  api: KubeApi;
  logger: Logger;
  metrics: OperatorMetrics;
  informers: Informers;
  redis?: StoreClient;
  sessions?: RedisSessionStore;
  status: StatusWriter;
  events: EventRecorder;
  /** The last compiled config of a namespace (policies for quota identities, api ids for references). */
  configs: Map<string, CompiledConfig>;
  /** Key hash → `namespace/name` of the AccessKey that owns its session. */
  keyOwners: Map<string, string>;
  /** api_ids of the valid ApiDefinitions per namespace (kept from the informer's events). */
  apiIds: ApiIdIndex;
  /** Per namespace, the statuses the last Config reconcile computed, written by the ConfigStatus key. */
  statusPlans: StatusPlans;
  /** What the last reconcile of each AccessKey found and wrote (a resync skips the unchanged ones). */
  keyMemos: KeyMemos;
  /** Per namespace, the inputs and outputs of its last complete config reconcile (a resync skips it unchanged). */
  settled: SettledConfigs;
  /** Per namespace, `Kind/name` of the resources refused for size (a log line when one is newly refused). */
  refused: Map<string, Set<string>>;
  /** Bytes of items and owner references per config ConfigMap (default SHARD_BUDGET_BYTES). */
  shardBudget?: number;
  /** Queues a resource again (live) whose change a reconcile's own write hid from the informer's events. */
  requeue?: (kind: string, ns: string, name: string) => void;
  /** The one namespace this controller watches (`--namespace`); undefined: all. */
  scope?: string;
}

/**
 * A Secret a resource refers to, as stored: from the informer (which holds only Secrets labelled
 * gw.io/secret), else read by name from the API server (a user's Secret without the label). undefined
 * when it does not exist; any other API error is thrown (the reconcile is retried).
 */
export async function referencedSecretRaw(
  ctx: OperatorContext,
  ns: string,
  name: string,
): Promise<KubeObject | undefined> {
  const cached = ctx.informers.secrets.get(ns, name);
  if (cached) return cached;
  try {
    const got = KubeObjectSchema.safeParse(await ctx.api.get(resourcePath(REFS.Secret, ns, name)));
    return got.success ? got.data : undefined;
  } catch (e) {
    if (codeOf(e) === 404) return undefined;
    throw e;
  }
}

/** A referenced Secret, validated (undefined when absent or not a valid Secret). */
export async function referencedSecret(ctx: OperatorContext, ns: string, name: string): Promise<Secret | undefined> {
  const raw = await referencedSecretRaw(ctx, ns, name);
  if (!raw) return undefined;
  const s = SecretResource.safeParse({ apiVersion: 'v1', kind: 'Secret', ...raw });
  return s.success ? s.data : undefined;
}

/**
 * Status write + a Warning Event and a warn log line when the reason changed to a failure (a resource
 * refused: an invalid spec, a listen path or api_id another ApiDefinition serves, a missing reference), and
 * a Normal Event `Accepted` with a warn log line when a resource refused until now is Ready (a refused
 * duplicate that starts serving once the one serving is deleted takes its traffic: an operator must see
 * it). Returns the resourceVersion the object has with this status: the one the write produced, or the one
 * it had when nothing had to be written.
 */
export async function report(
  ctx: OperatorContext,
  ref: ResourceRef,
  inf: Informer,
  obj: KubeObject,
  outcome: Outcome,
): Promise<string | undefined> {
  const before = readyCondition(obj);
  const written = await ctx.status.write(ref, obj, outcome);
  if (written) inf.remember(written);
  const where = { kind: ref.kind, namespace: obj.metadata.namespace, name: obj.metadata.name };
  if (!outcome.ready && (before?.reason !== outcome.reason || before?.status !== 'False')) {
    ctx.logger.warn({ ...where, reason: outcome.reason, message: outcome.message }, 'resource refused');
    await ctx.events.record(ref, obj, 'Warning', outcome.reason, outcome.message);
  } else if (outcome.ready && before?.status === 'False') {
    const message = `Ready (refused until now: ${before.reason ?? 'unknown'}): ${outcome.message}`;
    ctx.logger.warn({ ...where, was: before.reason, message: outcome.message }, 'resource refused until now is Ready');
    await ctx.events.record(ref, obj, 'Normal', 'Accepted', message);
  }
  if (!written) return obj.metadata.resourceVersion;
  const now = (written as { metadata?: Partial<KubeObject['metadata']> }).metadata;
  // the status landed on a newer spec, annotations or deletion than the one reconciled (a status write has no
  // precondition): the watch event of that change can no longer tell it (the cache already holds the newer
  // object), so the resource is reconciled again, and this status vouches for nothing
  if (
    now?.generation !== obj.metadata.generation ||
    now?.deletionTimestamp !== obj.metadata.deletionTimestamp ||
    JSON.stringify(now?.annotations ?? {}) !== JSON.stringify(obj.metadata.annotations ?? {})
  ) {
    ctx.requeue?.(ref.kind, obj.metadata.namespace ?? 'default', obj.metadata.name);
    return undefined;
  }
  return typeof now?.resourceVersion === 'string' ? now.resourceVersion : undefined;
}

/** Adds the finalizer (optimistic: the patch tests the resourceVersion). Returns the updated object. */
export async function ensureFinalizer(
  ctx: OperatorContext,
  ref: ResourceRef,
  inf: Informer,
  obj: KubeObject,
  finalizer: string,
): Promise<KubeObject> {
  const list = obj.metadata.finalizers ?? [];
  if (list.includes(finalizer)) return obj;
  const path = resourcePath(ref, obj.metadata.namespace, obj.metadata.name);
  const written = await ctx.api.patch(
    path,
    [
      { op: 'test', path: '/metadata/resourceVersion', value: obj.metadata.resourceVersion },
      { op: 'add', path: '/metadata/finalizers', value: [...list, finalizer] },
    ],
    'json',
  );
  ctx.metrics.writes.inc({ target: 'finalizer' });
  inf.remember(written);
  return inf.get(obj.metadata.namespace ?? '', obj.metadata.name) ?? obj;
}

/**
 * Removes `finalizer` from `obj` with one JSON patch that tests the resourceVersion it was read at (a
 * conflict is a 409, or a 422 from the test op). Returns the API server's answer (the written object), or
 * undefined when `obj` does not carry the finalizer. Shared by the reconcilers and `gw release-finalizers`.
 */
export async function patchOutFinalizer(
  api: KubeApi,
  ref: ResourceRef,
  obj: KubeObject,
  finalizer: string,
): Promise<{ written: unknown } | undefined> {
  const list = obj.metadata.finalizers ?? [];
  if (!list.includes(finalizer)) return undefined;
  const written = await api.patch(
    resourcePath(ref, obj.metadata.namespace, obj.metadata.name),
    [
      { op: 'test', path: '/metadata/resourceVersion', value: obj.metadata.resourceVersion },
      { op: 'replace', path: '/metadata/finalizers', value: list.filter((f) => f !== finalizer) },
    ],
    'json',
  );
  return { written };
}

export async function removeFinalizer(
  ctx: OperatorContext,
  ref: ResourceRef,
  inf: Informer,
  obj: KubeObject,
  finalizer: string,
): Promise<void> {
  const patched = await patchOutFinalizer(ctx.api, ref, obj, finalizer);
  if (!patched) return;
  ctx.metrics.writes.inc({ target: 'finalizer' });
  inf.remember(patched.written);
}

/** First zod issue as "path: message". */
export function firstIssue(e: { issues: { path: PropertyKey[]; message: string }[] }): string {
  const i = e.issues[0];
  return i ? `${i.path.map(String).join('.') || '(root)'}: ${i.message}` : 'invalid';
}

/** A Redis call failed: the resource reports Ready=False StoreUnavailable and is retried. */
export class StoreUnavailable extends Error {}

/** Awaits a Redis call, turning any failure into StoreUnavailable. */
export async function storeCall<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw new StoreUnavailable((e as Error).message);
  }
}
