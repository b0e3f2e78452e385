/**
 * AccessKeys → sessions by key hash. The key material is either spec.key_hash, or the raw key in a
 * Secret (hashed here; the raw value goes no further).
 */
import { secretValue, type AccessKey, type Secret } from '../crds/kinds.js';
import { sha256hex } from '../lib/hash.js';
import type { StoredSession } from '../contract/sessions.js';
import { findSecret, type ResourceSnapshot } from './snapshot.js';

export type KeyMaterial = { ok: true; keyHash: string } | { ok: false; reason: 'SecretNotFound'; message: string };

/** Finds a Secret by namespace and name (in a snapshot, in an informer's cache…). */
export type SecretLookup = (namespace: string, name: string) => Secret | undefined;

/** A SecretLookup over a snapshot. */
export const snapshotSecrets =
  (snapshot: ResourceSnapshot): SecretLookup =>
  (namespace, name) =>
    findSecret(snapshot, namespace, name);

/** The material last found for a key, with the Secret it came from: the same pair needs no hashing again. */
const materials = new WeakMap<AccessKey, { secret: Secret | undefined; m: KeyMaterial }>();

export function keyMaterial(key: AccessKey, secrets: SecretLookup): KeyMaterial {
  if (key.spec.key_hash) return { ok: true, keyHash: key.spec.key_hash };
  const ref = key.spec.secretRef!;
  const ns = key.metadata.namespace;
  const secret = secrets(ns, ref.name);
  const known = materials.get(key);
  if (known && known.secret === secret) return known.m;
  const m = materialOf(secret, ns, ref);
  materials.set(key, { secret, m });
  return m;
}

function materialOf(secret: Secret | undefined, ns: string, ref: { name: string; key: string }): KeyMaterial {
  // surrounding whitespace trimmed: a header value cannot carry it (the gateway trims what it reads), and
  // `kubectl create secret --from-file` keeps the file's trailing newline; untrimmed, such a key was
  // Ready and could never authenticate
  const raw = secret && secretValue(secret, ref.key)?.trim();
  if (!raw)
    return {
      ok: false,
      reason: 'SecretNotFound',
      message: `Secret ${ns}/${ref.name} has no key ${JSON.stringify(ref.key)}`,
    };
  return { ok: true, keyHash: sha256hex(raw) };
}
/** Each snapshot's AccessKeys by key hash (the first of two with one key), built on first use. */
const byHash = new WeakMap<ResourceSnapshot, Map<string, AccessKey>>();

export function keysByHash(snapshot: ResourceSnapshot): ReadonlyMap<string, AccessKey> {
  let index = byHash.get(snapshot);
  if (!index) {
    index = new Map();
    const secrets = snapshotSecrets(snapshot);
    for (const k of snapshot.keys) {
      const m = keyMaterial(k, secrets);
      if (m.ok && !index.has(m.keyHash)) index.set(m.keyHash, k);
    }
    byHash.set(snapshot, index);
  }
  return index;
}

/** The session record of a key: its spec without the key material, deprecated fields mapped. */
export function sessionOf(key: AccessKey): StoredSession {
  const { secretRef: _s, key_hash: _h, ...session } = key.spec;
  if (session.apply_policy_id && !session.apply_policies?.length) session.apply_policies = [session.apply_policy_id];
  if (session.enable_detail_recording !== undefined && session.enable_detailed_recording === undefined) {
    session.enable_detailed_recording = session.enable_detail_recording;
  }
  return { namespace: key.metadata.namespace, name: key.metadata.name, session };
}
