/**
 * AccessKey → session in Redis by key hash (stores/sessions-redis.ts: `gw:session:<hash>`, each write
 * published on `gw:sessions` so sidecar caches drop it at once).
 *   key material: spec.key_hash as is, or the Secret of spec.secretRef (hashed here). A secretRef to a
 *     Secret that does not exist gets a new Secret with a random 192-bit key, owned by the AccessKey.
 *     A Secret without the named key → SecretNotFound.
 *   policies stay references (apply_policies); the sidecar resolves them from the compiled config, so
 *     a policy change reaches every key with the next ConfigMap swap. A missing policy → PolicyNotFound
 *     (the session is still written; the sidecar refuses the key until the policy exists), an
 *     access_rights entry naming a missing API → ApiNotFound.
 *   quota: reset when the session is written for the first time for this AccessKey (status.keyHash
 *     was not this hash), unless annotated gw.io/suppress-reset: "true"; and whenever the annotation
 *     gw.io/quota-reset (a token the facade writes on each key write without suppress_reset) differs
 *     from status.quotaReset, which then records the token.
 *   finalizer gw.io/session-cleanup: a deleted AccessKey's session and its counters (every limiter and
 *     quota key of its hash identity) leave Redis before the finalizer is removed.
 * status.keyHash records the hash whose session this AccessKey owns (needed to clean up after a key
 * change or a deleted Secret); hashes are what Redis holds, never raw keys.
 */
import { z } from 'zod';
import { AccessKeyResource, PolicyResource, type AccessKey } from '../crds/kinds.js';
import { AccessKeyStatus } from '../crds/schemas/access-key.js';
import { sha256hex } from '../lib/hash.js';
import { SESSION_PREFIX } from '../contract/sessions.js';
import type { StoredSession } from '../contract/sessions.js';
import { storeKeys } from '../contract/store-keys.js';
import { deleteKeys, scanKeys } from '../lib/store/multi-key.js';
import { keyQuotaBuckets } from '../contract/limits/key-limits.js';
import { QUOTA_RESET_ANNOTATION, SUPPRESS_RESET_ANNOTATION } from '../contract/annotations.js';
import { keyMaterial, sessionOf } from '../compiler/key-sessions.js';
import { compileNamespace } from './reconcile-config.js';
import {
  ensureFinalizer,
  firstIssue,
  GENERATED_SECRET_LABELS,
  referencedSecret,
  referencedSecretRaw,
  REFS,
  removeFinalizer,
  report,
  storeCall,
  StoreUnavailable,
  type OperatorContext,
} from './context.js';
import type { KubeObject } from '../lib/kube/informer.js';
import { codeOf, resourcePath } from '../lib/kube/api.js';
import { inactivePolicyReference, missingKeyReferences } from '../compiler/key-references.js';
import { notReady, notReadyAll, ok, type Outcome } from './status.js';
const { randomBytes } = process.getBuiltinModule('node:crypto');

export const KEY_FINALIZER = 'gw.io/session-cleanup';

const KeyStatus = z.looseObject({ status: AccessKeyStatus.optional() });
const ownedHash = (raw: KubeObject): string | undefined => KeyStatus.safeParse(raw).data?.status?.keyHash;
/** The last gw.io/quota-reset token acted on. */
const doneReset = (raw: KubeObject): string | undefined => KeyStatus.safeParse(raw).data?.status?.quotaReset;

/**
 * Deletes the session and every limiter/quota counter of the hash identity (`k:h:<hash>…`, `q:h:<hash>…`):
 * scanned on every master of a cluster, deleted per key there (the counters carry different hash tags).
 */
export async function deleteSessionAndCounters(ctx: OperatorContext, hash: string): Promise<void> {
  const redis = ctx.redis!;
  await storeCall(ctx.sessions!.delete(hash));
  ctx.metrics.writes.inc({ target: 'session_delete' });
  for (const prefix of [`gw:{k:h:${hash}`, `gw:{q:h:${hash}`]) {
    await storeCall(
      (async () => {
        for await (const keys of scanKeys(redis, `${prefix}*`)) await deleteKeys(redis, keys);
      })(),
    );
  }
}

async function resetQuota(ctx: OperatorContext, hash: string, stored: StoredSession): Promise<void> {
  const config = ctx.configs.get(stored.namespace) ?? compileNamespace(ctx, stored.namespace);
  // one DEL per bucket: the buckets carry different hash tags (Redis Cluster)
  for (const b of keyQuotaBuckets(hash, stored, config)) await storeCall(ctx.redis!.del(storeKeys.quota(b)));
  ctx.metrics.writes.inc({ target: 'quota_reset' });
}

/** The key material: a hash, or the reason there is none yet. Creates the Secret when it does not exist. */
async function keyHashOf(
  ctx: OperatorContext,
  key: AccessKey,
  raw: KubeObject,
): Promise<{ hash: string } | { outcome: Outcome }> {
  const ns = key.metadata.namespace;
  const ref = key.spec.secretRef;
  const existing = !key.spec.key_hash && ref ? await referencedSecretRaw(ctx, ns, ref.name) : undefined;
  if (!key.spec.key_hash && ref && !existing) {
    const value = randomBytes(24).toString('base64url');
    const body = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name: ref.name,
        namespace: ns,
        labels: { ...GENERATED_SECRET_LABELS },
        ownerReferences: raw.metadata.uid
          ? [
              {
                apiVersion: (raw as { apiVersion?: string }).apiVersion ?? 'gw.io/v1alpha1',
                kind: 'AccessKey',
                name: key.metadata.name,
                uid: raw.metadata.uid,
              },
            ]
          : [],
      },
      data: { [ref.key]: Buffer.from(value, 'utf8').toString('base64') },
    };
    try {
      const written = await ctx.api.post(resourcePath(REFS.Secret, ns), body);
      ctx.metrics.writes.inc({ target: 'secret' });
      ctx.informers.secrets.remember(written);
      ctx.logger.info(
        { accessKey: `${ns}/${key.metadata.name}`, secret: `${ns}/${ref.name}` },
        'generated a random key into a new Secret',
      );
      return { hash: sha256hex(value) };
    } catch (e) {
      if (codeOf(e) !== 409) throw e;
      // Created meanwhile (by someone else): read below.
    }
  }
  const secret = ref && !key.spec.key_hash ? await referencedSecret(ctx, ns, ref.name) : undefined;
  const m = keyMaterial(key, () => secret);
  return m.ok ? { hash: m.keyHash } : { outcome: notReady(m.reason, m.message) };
}

export async function reconcileKey(ctx: OperatorContext, ns: string, name: string): Promise<void> {
  const inf = ctx.informers.keys;
  let raw = inf.get(ns, name);
  if (!raw) return;
  const resKey = `${ns}/${name}`;
  // nothing it depends on changed since it was stored (key-memo.ts): a resync's or a dependency's re-check
  if (ctx.keyMemos.current(ctx, raw)) {
    ctx.metrics.unchanged.inc({ kind: 'AccessKey' });
    return;
  }
  ctx.keyMemos.forget(ns, name); // recorded again only by a reconcile that stores the session

  if (raw.metadata.deletionTimestamp) {
    if (!raw.metadata.finalizers?.includes(KEY_FINALIZER)) return;
    if (!ctx.redis) throw new StoreUnavailable('no --redis: cannot clean up the session');
    const hashes = new Set<string>();
    const owned = ownedHash(raw);
    if (owned) hashes.add(owned);
    const parsed = AccessKeyResource.safeParse(raw);
    if (parsed.success && parsed.data.spec.key_hash) hashes.add(parsed.data.spec.key_hash);
    for (const h of hashes) {
      const owner = ctx.keyOwners.get(h);
      if (owner && owner !== resKey && inf.get(...(owner.split('/') as [string, string]))) continue; // another key owns it now
      await deleteSessionAndCounters(ctx, h);
      ctx.keyOwners.delete(h);
    }
    await removeFinalizer(ctx, REFS.AccessKey, inf, raw, KEY_FINALIZER);
    ctx.logger.info({ accessKey: resKey }, 'session removed; finalizer released');
    return;
  }

  raw = await ensureFinalizer(ctx, REFS.AccessKey, inf, raw, KEY_FINALIZER);
  ctx.metrics.validated.inc({ kind: 'AccessKey' });
  const parsed = AccessKeyResource.safeParse(raw);
  if (!parsed.success) return withdraw(ctx, raw, resKey, notReady('InvalidSpec', firstIssue(parsed.error)));
  const key = parsed.data;

  const material = await keyHashOf(ctx, key, raw);
  // no key material (e.g. the Secret no longer holds the named key): fail closed, as for an invalid spec —
  // removing the key from its Secret revokes it
  if ('outcome' in material) return withdraw(ctx, raw, resKey, material.outcome);
  const hash = material.hash;
  const owner = ctx.keyOwners.get(hash);
  if (owner && owner !== resKey) {
    const other = inf.get(...(owner.split('/') as [string, string]));
    if (other && !other.metadata.deletionTimestamp) {
      return void (await report(
        ctx,
        REFS.AccessKey,
        inf,
        raw,
        notReady('InvalidSpec', `the same key is already used by AccessKey ${owner}`),
      ));
    }
  }
  if (!ctx.redis || !ctx.sessions)
    return void (await report(
      ctx,
      REFS.AccessKey,
      inf,
      raw,
      notReady('StoreUnavailable', 'the controller runs without --redis'),
    ));

  const stored = sessionOf(key);
  const previous = ownedHash(raw);
  const resetDone = doneReset(raw);
  const resetWanted = key.metadata.annotations?.[QUOTA_RESET_ANNOTATION];
  const json = JSON.stringify(stored);
  try {
    const current = await storeCall(ctx.redis.get(SESSION_PREFIX + hash));
    // The session belongs to an AccessKey of a namespace this controller does not watch (controllers of
    // several namespaces sharing one Redis): the same key twice, refused like a duplicate here, so the two
    // controllers do not take the session from each other on every resync.
    const foreign = ctx.scope === undefined ? undefined : foreignOwner(current, ctx.scope);
    if (foreign)
      return void (await report(
        ctx,
        REFS.AccessKey,
        inf,
        raw,
        notReady(
          'InvalidSpec',
          `the same key is already used by AccessKey ${foreign} (a namespace this controller does not watch)`,
        ),
      ));
    if (current !== json) {
      await storeCall(ctx.sessions.put(hash, stored));
      ctx.metrics.writes.inc({ target: 'session' });
    }
    ctx.keyOwners.set(hash, resKey);
    if (previous !== hash) {
      if (previous) {
        await deleteSessionAndCounters(ctx, previous);
        if (ctx.keyOwners.get(previous) === resKey) ctx.keyOwners.delete(previous);
      }
    }
    const firstWrite = previous !== hash && key.metadata.annotations?.[SUPPRESS_RESET_ANNOTATION] !== 'true';
    if (firstWrite || (resetWanted !== undefined && resetWanted !== resetDone)) await resetQuota(ctx, hash, stored);
  } catch (e) {
    await storeDown(ctx, raw, e, {
      ...(previous ? { keyHash: previous } : {}),
      ...(resetDone !== undefined ? { quotaReset: resetDone } : {}),
    });
  }

  // References: reported, the session stays (the sidecar resolves policies and fails closed).
  const extra = { keyHash: hash, ...(resetWanted !== undefined ? { quotaReset: resetWanted } : {}) };
  // a policy that exists but does not validate is named as such (its own Ready condition says why)
  const states = new Map((stored.session.apply_policies ?? []).map((p) => [p, policyState(ctx, ns, p)]));
  const named = (state: string): string[] => [...states].filter(([, st]) => st === state).map(([p]) => p);
  const [invalid, inactive] = [named('invalid'), named('inactive')];
  const refs = missingKeyReferences(
    stored.session,
    ns,
    (p) => states.get(p) !== 'missing',
    (a) => ctx.apiIds.has(ns, a),
  );
  // the gateway refuses a key that applies an inactive policy (fail closed): its Ready says so
  const inactiveRef = inactivePolicyReference(ns, inactive);
  if (inactiveRef) refs.unshift(inactiveRef);
  if (invalid.length)
    refs.unshift([
      'PolicyNotFound',
      `policy not valid in namespace ${ns} (see its Ready condition): ${invalid.join(', ')}`,
    ]);
  const rv = await report(ctx, REFS.AccessKey, inf, raw, notReadyAll(refs, extra) ?? ok('session stored', extra));
  ctx.keyMemos.record(ctx, ns, name, rv, {
    hash,
    json,
    policies: stored.session.apply_policies ?? [],
    apis: Object.keys(stored.session.access_rights ?? {}),
    ...(!key.spec.key_hash && key.spec.secretRef ? { secret: key.spec.secretRef.name } : {}),
  });
}

/**
 * An AccessKey edited into a spec the controller cannot serve (the API server cannot check everything,
 * e.g. a regex) fails closed: the session written for its previous spec is removed, so an edit that
 * meant to deactivate or restrict the key never leaves it working as before. Its counters and
 * status.keyHash stay, so fixing the spec brings the key back without a quota reset.
 */
async function withdraw(ctx: OperatorContext, raw: KubeObject, resKey: string, outcome: Outcome): Promise<void> {
  const previous = ownedHash(raw);
  if (previous && ctx.sessions && (ctx.keyOwners.get(previous) ?? resKey) === resKey) {
    try {
      if (await storeCall(ctx.sessions.delete(previous))) ctx.metrics.writes.inc({ target: 'session_delete' });
    } catch (e) {
      await storeDown(ctx, raw, e, { keyHash: previous });
    }
  }
  await report(ctx, REFS.AccessKey, ctx.informers.keys, raw, {
    ...outcome,
    extra: { ...outcome.extra, ...(previous ? { keyHash: previous } : {}) },
  });
}

const SessionOwner = z.object({ namespace: z.string(), name: z.string().optional() });

/** `namespace/name` of the AccessKey a stored session belongs to, when that namespace is not `scope`. */
function foreignOwner(current: string | null, scope: string): string | undefined {
  if (current === null) return undefined;
  let owner;
  try {
    owner = SessionOwner.safeParse(JSON.parse(current)).data;
  } catch {
    return undefined; // not JSON: bad store content, overwritten
  }
  return owner && owner.namespace !== scope ? `${owner.namespace}/${owner.name ?? '?'}` : undefined;
}

/** A policy of the namespace's cache: missing, invalid, inactive (`active: false`) or valid (parsed once per reconcile). */
function policyState(ctx: OperatorContext, ns: string, name: string): 'missing' | 'valid' | 'invalid' | 'inactive' {
  const raw = ctx.informers.policies.get(ns, name);
  if (raw === undefined) return 'missing';
  const p = PolicyResource.safeParse(raw);
  return !p.success ? 'invalid' : p.data.spec.active === false ? 'inactive' : 'valid';
}

/** The store went away mid-reconcile: Ready=False StoreUnavailable keeping what status recorded, then the retry. */
async function storeDown(
  ctx: OperatorContext,
  raw: KubeObject,
  e: unknown,
  kept: Record<string, unknown>,
): Promise<never> {
  if (!(e instanceof StoreUnavailable)) throw e;
  await report(
    ctx,
    REFS.AccessKey,
    ctx.informers.keys,
    raw,
    notReady('StoreUnavailable', `Redis: ${e.message}`, Object.keys(kept).length ? kept : undefined),
  );
  throw e;
}
