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

export function keyMaterial(key: AccessKey, secrets: SecretLookup): KeyMaterial {
  if (key.spec.key_hash) return { ok: true, keyHash: key.spec.key_hash };
  const ref = key.spec.secretRef!;
  const ns = key.metadata.namespace;
  const secret = secrets(ns, ref.name);
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
/** The session record of a key: its spec without the key material, deprecated fields mapped. */
export function sessionOf(key: AccessKey): StoredSession {
  const { secretRef: _s, key_hash: _h, ...session } = key.spec;
  if (session.apply_policy_id && !session.apply_policies?.length) session.apply_policies = [session.apply_policy_id];
  if (session.enable_detail_recording !== undefined && session.enable_detailed_recording === undefined) {
    session.enable_detailed_recording = session.enable_detail_recording;
  }
  return { namespace: key.metadata.namespace, name: key.metadata.name, session };
}
