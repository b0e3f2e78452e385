/**
 * Standalone's reconciler: the manifests directory → compiled config + sessions, the same job the
 * operator does in a cluster (ConfigMaps + Redis), done in process.
 */
import { stringify } from 'yaml';
import type { Logger } from '../lib/logger.js';
import type { SessionStore, StoredSession } from '../contract/sessions.js';
import type { CompiledConfig } from '../contract/config.js';
import { IncrementalCompiler } from '../compiler/incremental-config.js';
import { keyMaterial, sessionOf, snapshotSecrets } from '../compiler/key-sessions.js';
import type { AccessKey, OAuthClient, Policy, Secret } from '../crds/kinds.js';
import { resourceLabel, type ResourceSnapshot } from '../compiler/snapshot.js';
import { missingReferences, referenceIndexSliced, type ReferenceIndex } from './references.js';
import { secretValue } from '../crds/kinds.js';
import { clientRecordOf } from '../compiler/client-records.js';
import { clientRecordKey, type ClientRecord } from '../contract/oauth/clients.js';
import { MemoryClientDirectory } from '../stores/oauth/client-directories.js';
import { ChangedNotesLog, noteOn, refusalNote, type Notes } from './report.js';
import { Yielder } from '../lib/yielder.js';
const { randomBytes } = process.getBuiltinModule('node:crypto');
const { mkdirSync, writeFileSync, existsSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

/** Session writes in flight at once during an apply. */
const WRITE_BATCH = 500;
/** An edit of at most this many keys (or a quarter of them) is applied alone. */
const KEY_EDIT_MIN = 2000;

/**
 * The items of `before` not in `after` and of `after` not in `before` (by identity); the common head and
 * tail are skipped first (a file edited among many: its keys are the middle).
 */
async function identityDiff<T>(
  before: readonly T[],
  after: readonly T[],
  y: Yielder,
): Promise<{ removed: T[]; added: T[] }> {
  let head = 0;
  const min = Math.min(before.length, after.length);
  while (head < min && before[head] === after[head]) head++;
  let tail = 0;
  while (tail < min - head && before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail++;
  const was = new Set<T>();
  for (let i = head; i < before.length - tail; i++) {
    if ((i & 1023) === 0) await y.maybe();
    was.add(before[i]!);
  }
  const is = new Set<T>();
  const added: T[] = [];
  for (let i = head; i < after.length - tail; i++) {
    if ((i & 1023) === 0) await y.maybe();
    is.add(after[i]!);
    if (!was.has(after[i]!)) added.push(after[i]!);
  }
  const removed: T[] = [];
  for (const x of was) if (!is.has(x)) removed.push(x);
  return { removed, added };
}

/** Each AccessKey's session and its JSON, computed once per resource (a change is a new resource object). */
const storedSessions = new WeakMap<AccessKey, { stored: StoredSession; json: string }>();

function storedOf(key: AccessKey): { stored: StoredSession; json: string } {
  let s = storedSessions.get(key);
  if (!s) {
    const stored = sessionOf(key);
    storedSessions.set(key, (s = { stored, json: JSON.stringify(stored) }));
  }
  return s;
}

/**
 * What the keys' sessions, their notes and the clients are computed from: the keys, Secrets and clients,
 * and which api_ids and policies exist (`refs`: a count of the changes of that set).
 */
interface KeyInputs {
  keys: readonly AccessKey[];
  secrets: readonly Secret[];
  clients: readonly OAuthClient[];
  refs: number;
}

/** The same objects in the same order (a directory read reuses the objects of the files it did not re-read). */
function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

function sameKeyInputs(a: KeyInputs, b: KeyInputs): boolean {
  return (
    a.refs === b.refs && sameItems(a.keys, b.keys) && sameItems(a.secrets, b.secrets) && sameItems(a.clients, b.clients)
  );
}

const policyNames = (policies: readonly Policy[]): Set<string> =>
  new Set(policies.map((p) => `${p.metadata.namespace}/${p.metadata.name}`));

/** A session to write: key hash, stored session, the key's annotations, its JSON (to skip unchanged ones). */
type SessionWrite = [string, StoredSession, Record<string, string>, string];

export class StandaloneState {
  private config: CompiledConfig = { hash: '', apis: [], policies: {} };
  /** The sessions written, by key hash: the JSON the store was given (to compare). */
  private written = new Map<string, string>();
  /** The directory's sessions by key hash, whether or not the store took them (the fallback while it is down). */
  private known = new Map<string, StoredSession>();
  private applying: Promise<void> = Promise.resolve();
  private readonly notesLog: ChangedNotesLog;
  /** Write every session on the next apply (resync), not only the changed ones. */
  private rewrite = false;
  /** What the keys' sessions and notes were last computed from, and those notes. */
  private keyInputs?: KeyInputs;
  private keyNotes: Notes = new Map();
  /** What existed for the keys' references at the last apply through the keys. */
  private lastRefs?: ReferenceIndex;
  /** The keys by what they refer to, for the last list of keys (applyRefsChange). */
  private referring?: { keys: readonly AccessKey[]; by: Map<string, AccessKey[]> };
  /** How many applies went through the keys (tests: an edit of an API leaves them alone). */
  keyApplies = 0;
  /** How many of those went through the edited keys only (tests). */
  keyEdits = 0;
  /** The key serving each key hash, and the hashes more than one key of the directory claims. */
  private winners = new Map<string, { key: AccessKey; stored: StoredSession; json: string }>();
  private dupHashes = new Set<string>();
  /** The snapshot `winners` is complete for (undefined while an apply is under way, or after one failed). */
  private appliedSnapshot?: ResourceSnapshot;
  /** The compiled config, kept up to date edit by edit; how many applies changed it (tests). */
  private readonly compiler = new IncrementalCompiler();
  compiles = 0;
  private lastCompiled?: CompiledConfig;
  /** ApiDefinitions decided again by the last apply (tests: an edit looks at its own APIs only). */
  lastDecided = 0;
  /** Changes of the set of api_ids and policy names the keys may refer to. */
  private refsVersion = 0;
  private policyNames = new Set<string>();
  /** The OAuth clients of the directory whose API, policy and Secret exist (what the operator would store). */
  readonly clients = new MemoryClientDirectory();

  constructor(
    private readonly dir: string,
    private readonly sessions: SessionStore,
    private readonly logger: Logger,
    private readonly onKeyAdded: (
      keyHash: string,
      stored: StoredSession,
      annotations: Record<string, string>,
    ) => Promise<void> = async () => {},
    /** OAuth clients gone from the directory (or replaced by another of the same id): their tokens are revoked. */
    private readonly onClientsRemoved: (removed: ClientRecord[]) => Promise<void> = async () => {},
  ) {
    this.notesLog = new ChangedNotesLog(logger);
  }

  current(): CompiledConfig {
    return this.config;
  }

  /**
   * The session of a key of the directory (the fallback while Redis is down), also when the store never
   * took it: a standalone started while its Redis is down serves its directory's keys.
   */
  session(keyHash: string): StoredSession | undefined {
    return this.known.get(keyHash);
  }

  /**
   * The AccessKey serving each key hash of `snapshot` (the first of the directory's order with that key),
   * when `snapshot` is the one last applied: kept edit by edit, so a facade write looks a key up without
   * going through every key (undefined: not known here, the caller indexes the snapshot itself).
   */
  keysOf(snapshot: ResourceSnapshot): { get(keyHash: string): AccessKey | undefined } | undefined {
    if (snapshot !== this.appliedSnapshot) return undefined;
    const winners = this.winners;
    return { get: (keyHash) => winners.get(keyHash)?.key };
  }

  /** Serialised: snapshots are applied one after another, in order. */
  apply(snapshot: ResourceSnapshot, rewrite = false): Promise<void> {
    this.applying = this.applying
      .then(() => {
        if (rewrite) this.rewrite = true;
        return this.applyNow(snapshot);
      })
      .catch((e: unknown) => {
        this.logger.error({ err: (e as Error).message }, 'applying resources failed');
      });
    return this.applying;
  }

  private async applyNow(snapshot: ResourceSnapshot): Promise<void> {
    this.appliedSnapshot = undefined;
    // an API that claims the listen path or api_id of one being served is refused: the served one stays.
    // Only the edited ApiDefinitions (and those they clash with) are compiled and decided again; the same
    // ApiDefinition and Policy objects as the last apply (an edit of keys, Secrets, clients): the same config
    const { config, problems, delta } = await this.compiler.update(snapshot.apis, snapshot.policies);
    this.lastDecided = delta.decided;
    if (config !== this.lastCompiled) this.compiles++;
    this.lastCompiled = config;
    let refsChanged = delta.apiIdsChanged;
    if (delta.policiesChanged) {
      const names = policyNames(snapshot.policies);
      if (!sameSet(names, this.policyNames)) refsChanged = true;
      this.policyNames = names;
    }
    if (refsChanged) this.refsVersion++;
    const y = new Yielder();
    const notes: Notes = new Map();
    for (let i = 0; i < problems.length; i++) {
      if ((i & 255) === 0) await y.maybe();
      const p = problems[i]!;
      notes.set(`refused ${resourceLabel(snapshot, p.resource)}`, refusalNote(snapshot, p));
    }
    if (config.hash !== this.config.hash) {
      this.config = config;
      this.logger.info(
        { apis: config.apis.length, policies: Object.keys(config.policies).length, hash: config.hash },
        'config applied',
      );
    }

    // the keys' sessions and notes depend on the keys, Secrets and OAuthClients and on which api_ids and
    // policies exist: an edit that changes none of them (an API's path, rate, rules…) skips that work
    const inputs: KeyInputs = {
      keys: snapshot.keys,
      secrets: snapshot.secrets,
      clients: snapshot.clients,
      refs: this.refsVersion,
    };
    const last = this.keyInputs;
    if (this.rewrite || !last || !sameKeyInputs(last, inputs)) {
      // only keys added or removed (a key file edited): those keys alone, when that can be decided locally
      const edited =
        !this.rewrite &&
        last !== undefined &&
        last.refs === inputs.refs &&
        sameItems(last.secrets, inputs.secrets) &&
        sameItems(last.clients, inputs.clients) &&
        (await this.applyKeyEdit(last.keys, inputs.keys, snapshot));
      // only which api_ids and policies exist changed (APIs added or removed): the notes of the keys that
      // refer to those, and the clients; the sessions do not depend on it
      const refsOnly =
        !edited &&
        !this.rewrite &&
        last !== undefined &&
        last.refs !== inputs.refs &&
        sameItems(last.keys, inputs.keys) &&
        sameItems(last.secrets, inputs.secrets) &&
        sameItems(last.clients, inputs.clients) &&
        (await this.applyRefsChange(snapshot, y));
      if (!edited && !refsOnly) {
        const keyNotes: Notes = new Map();
        // what exists, for the keys' and clients' references (none: nothing refers to anything)
        const refs =
          snapshot.keys.length + snapshot.clients.length
            ? await referenceIndexSliced(snapshot, y)
            : { apis: new Set<string>(), policies: new Set<string>() };
        await this.applyKeys(snapshot, refs, keyNotes);
        this.keyNotes = keyNotes;
        this.lastRefs = refs;
      }
      this.keyInputs = inputs; // only once the store took every write: a failed apply is done again
      this.keyApplies++;
    }
    let i = 0;
    for (const [k, v] of this.keyNotes) {
      if ((++i & 1023) === 0) await y.maybe();
      notes.set(k, v);
    }
    await this.notesLog.log(notes, y);
    this.rewrite = false;
    this.appliedSnapshot = snapshot;
  }

  /**
   * The keys added and removed since the last apply (Secrets, clients, api_ids and policies the same),
   * applied alone: their sessions written or deleted, their notes. False (nothing changed) when the edit
   * cannot be decided from those keys alone — many keys, a key hash claimed twice, a key without its key
   * material — and the caller goes through every key.
   */
  private async applyKeyEdit(
    before: readonly AccessKey[],
    after: readonly AccessKey[],
    snapshot: ResourceSnapshot,
  ): Promise<boolean> {
    const y = new Yielder();
    const { removed, added } = await identityDiff(before, after, y);
    if (removed.length + added.length > Math.max(KEY_EDIT_MIN, after.length / 4)) return false;
    const secrets = snapshotSecrets(snapshot);
    const leaving = new Map<string, AccessKey>();
    let i = 0;
    for (const key of removed) {
      if ((++i & 31) === 0) await y.maybe();
      const m = keyMaterial(key, secrets);
      if (!m.ok) continue; // it served nothing (its note goes below)
      if (this.dupHashes.has(m.keyHash)) return false;
      if (this.winners.get(m.keyHash)?.key === key) leaving.set(m.keyHash, key);
    }
    const coming = new Map<string, AccessKey>();
    for (const key of added) {
      if ((++i & 31) === 0) await y.maybe();
      const m = keyMaterial(key, secrets);
      if (!m.ok || coming.has(m.keyHash)) return false;
      const holder = this.winners.get(m.keyHash);
      if (holder && leaving.get(m.keyHash) !== holder.key) return false; // a duplicate of a key that stays
      coming.set(m.keyHash, key);
    }

    const refs = await referenceIndexSliced(snapshot, y);
    this.lastRefs = refs;
    for (const key of removed) {
      if ((++i & 63) === 0) await y.maybe();
      const label = resourceLabel(snapshot, key);
      for (const what of ['secret', 'duplicate', 'missing']) this.keyNotes.delete(`${what} ${label}`);
    }
    const writes: SessionWrite[] = [];
    for (const [hash, key] of coming) {
      if ((++i & 15) === 0) await y.maybe();
      const s = storedOf(key);
      const missing = missingReferences(key, refs, s.stored.session);
      if (missing !== undefined)
        this.keyNotes.set(
          `missing ${resourceLabel(snapshot, key)}`,
          noteOn(snapshot, key, `refers to something missing: ${missing}`),
        );
      this.winners.set(hash, { key, ...s });
      this.known.set(hash, s.stored);
      if (this.written.get(hash) !== s.json) writes.push([hash, s.stored, key.metadata.annotations ?? {}, s.json]);
    }
    await this.writeSessions(writes);
    for (const hash of leaving.keys()) {
      if (coming.has(hash)) continue;
      this.winners.delete(hash);
      this.known.delete(hash);
      if (this.written.has(hash)) {
        await this.sessions.delete(hash);
        this.written.delete(hash);
      }
    }
    this.keyEdits++;
    return true;
  }

  /**
   * The api_ids and policy names that exist changed, nothing else the keys depend on: the missing-reference
   * notes of the keys that refer to one of the changed ones, and the clients (their records and notes).
   * False when the last apply's index is not known (the caller goes through every key).
   */
  private async applyRefsChange(snapshot: ResourceSnapshot, y: Yielder): Promise<boolean> {
    const before = this.lastRefs;
    if (!before) return false;
    const refs = await referenceIndexSliced(snapshot, y);
    const changed: string[] = [];
    let i = 0;
    for (const [prefix, a, b] of [
      ['A', refs.apis, before.apis],
      ['P', refs.policies, before.policies],
      ['A', before.apis, refs.apis],
      ['P', before.policies, refs.policies],
    ] as const) {
      for (const id of a) {
        if ((++i & 1023) === 0) await y.maybe();
        if (!b.has(id)) changed.push(prefix + id);
      }
    }
    const referring = await this.keysByReference(snapshot.keys, y);
    const keys = new Set<AccessKey>();
    for (const ref of changed) for (const key of referring.get(ref) ?? []) keys.add(key);
    for (const key of keys) {
      if ((++i & 15) === 0) await y.maybe();
      this.noteMissing(snapshot, key, missingReferences(key, refs, storedOf(key).stored.session));
    }
    for (const c of snapshot.clients) {
      if ((++i & 15) === 0) await y.maybe();
      this.noteMissing(snapshot, c, missingReferences(c, refs));
    }
    await this.applyClients(snapshot, refs);
    this.lastRefs = refs;
    return true;
  }

  private noteMissing(snapshot: ResourceSnapshot, r: AccessKey | OAuthClient, missing: string | undefined): void {
    const id = `missing ${resourceLabel(snapshot, r)}`;
    if (missing === undefined) this.keyNotes.delete(id);
    else this.keyNotes.set(id, noteOn(snapshot, r, `refers to something missing: ${missing}`));
  }

  /**
   * The keys of a list by what they refer to (`A` + namespace/api_id, `P` + namespace/policy), built once
   * per list of keys, in slices.
   */
  private async keysByReference(keys: readonly AccessKey[], y: Yielder): Promise<Map<string, AccessKey[]>> {
    if (this.referring?.keys === keys) return this.referring.by;
    const by = new Map<string, AccessKey[]>();
    const add = (ref: string, key: AccessKey): void => {
      const list = by.get(ref);
      if (list) list.push(key);
      else by.set(ref, [key]);
    };
    for (let i = 0; i < keys.length; i++) {
      if ((i & 15) === 0) await y.maybe();
      const key = keys[i]!;
      const ns = key.metadata.namespace;
      const session = storedOf(key).stored.session;
      for (const p of session.apply_policies ?? []) add(`P${ns}/${p}`, key);
      for (const a of Object.keys(session.access_rights ?? {})) add(`A${ns}/${a}`, key);
    }
    this.referring = { keys, by };
    return by;
  }

  /** The sessions of the directory's keys written to the store (those that changed), their notes, the clients. */
  private async applyKeys(snapshot: ResourceSnapshot, refs: ReferenceIndex, notes: Notes): Promise<void> {
    const y = new Yielder();
    await this.noteMissingReferences(snapshot, refs, notes, y);
    await this.applyClients(snapshot, refs);
    const next = new Map<string, { key: AccessKey; stored: StoredSession; json: string }>();
    const dupHashes = new Set<string>();
    const known = new Map<string, StoredSession>();
    const secrets = snapshotSecrets(snapshot);
    let i = 0;
    for (const key of snapshot.keys) {
      if ((++i & 15) === 0) await y.maybe();
      const m = keyMaterial(key, secrets);
      if (!m.ok) {
        const ns = key.metadata.namespace;
        const ref = key.spec.secretRef!;
        const secret = secrets(ns, ref.name);
        // docs/contract.md#resources: only a Secret that does not exist is generated; one without the named key is the
        // operator's SecretNotFound: the key is not served (a generated Secret would shadow the user's)
        if (!secret) {
          const failed = this.generateSecret(ns, ref.name, ref.key, key.metadata.name);
          if (failed)
            notes.set(`secret ${resourceLabel(snapshot, key)}`, noteOn(snapshot, key, `not served: ${failed}`));
        } else
          notes.set(
            `secret ${resourceLabel(snapshot, key)}`,
            noteOn(
              snapshot,
              key,
              `not served: ${resourceLabel(snapshot, secret)} has no key ${JSON.stringify(ref.key)}`,
            ),
          );
        continue;
      }
      const first = next.get(m.keyHash);
      if (first) {
        dupHashes.add(m.keyHash);
        notes.set(
          `duplicate ${resourceLabel(snapshot, key)}`,
          noteOn(snapshot, key, `refused: ${resourceLabel(snapshot, first.key)} has the same key`),
        );
        continue;
      }
      const s = storedOf(key);
      next.set(m.keyHash, { key, ...s });
      known.set(m.keyHash, s.stored);
    }
    this.known = known;
    this.winners = next;
    this.dupHashes = dupHashes;
    const writes: SessionWrite[] = [];
    for (const [hash, { key, stored, json }] of next) {
      if ((++i & 255) === 0) await y.maybe();
      if (this.rewrite || this.written.get(hash) !== json)
        writes.push([hash, stored, key.metadata.annotations ?? {}, json]);
    }
    await this.writeSessions(writes);
    for (const hash of [...this.written.keys()]) {
      if ((++i & 1023) === 0) await y.maybe();
      if (!next.has(hash)) {
        await this.sessions.delete(hash);
        this.written.delete(hash);
      }
    }
  }

  /**
   * Applies `snapshot` writing every session again, even unchanged ones: the store is back after a lost
   * connection, possibly empty (a Redis restarted without persistence), and the directory is the source
   * of truth. Keys written before are not additions: their quotas are not reset. Should the writes fail,
   * the next apply writes everything again too.
   */
  resync(snapshot: ResourceSnapshot): Promise<void> {
    return this.apply(snapshot, true);
  }

  /**
   * The clients a gateway serves: those whose API, policy (when named) and Secret exist, as the operator
   * writes them to Redis. A client that went away, or whose resource changed identity (deleted and
   * written again: another uid, or another file), has its tokens revoked.
   */
  private async applyClients(snapshot: ResourceSnapshot, index: ReferenceIndex): Promise<void> {
    const secrets = snapshotSecrets(snapshot);
    const next: ClientRecord[] = [];
    for (const c of snapshot.clients) {
      if (missingReferences(c, index) !== undefined) continue;
      const secretObj = secrets(c.metadata.namespace, c.spec.secretRef.name);
      const secret = secretObj && secretValue(secretObj, c.spec.secretRef.key);
      if (secret) next.push(clientRecordOf(c, secret));
    }
    const before = new Map(
      [...this.clients.all()].map((r) => [clientRecordKey(r.namespace, r.api_id, r.client_id), r]),
    );
    this.clients.replace(next);
    const kept = new Set(next.map((r) => `${clientRecordKey(r.namespace, r.api_id, r.client_id)}\u0000${r.uid ?? ''}`));
    const removed = [...before].filter(([k, r]) => !kept.has(`${k}\u0000${r.uid ?? ''}`)).map(([, r]) => r);
    if (removed.length) await this.onClientsRemoved(removed);
  }

  /** AccessKeys and OAuthClients that refer to a policy or an API the directory lacks. */
  private async noteMissingReferences(
    snapshot: ResourceSnapshot,
    index: ReferenceIndex,
    notes: Notes,
    y: Yielder,
  ): Promise<void> {
    let i = 0;
    for (const r of [...snapshot.keys, ...snapshot.clients]) {
      if ((++i & 15) === 0) await y.maybe();
      const missing = missingReferences(r, index, r.kind === 'AccessKey' ? storedOf(r).stored.session : undefined);
      if (missing !== undefined)
        notes.set(
          `missing ${resourceLabel(snapshot, r)}`,
          noteOn(snapshot, r, `refers to something missing: ${missing}`),
        );
    }
  }

  /**
   * A secretRef to a Secret that does not exist: generate a random key into a new Secret manifest (as the
   * operator does). Undefined when written (or already there), else why not: the AccessKey is then not served.
   */
  private generateSecret(namespace: string, name: string, dataKey: string, keyName: string): string | undefined {
    const dir = join(this.dir, '.gw');
    const file = join(dir, `secret-${namespace}-${name}.yaml`);
    try {
      if (existsSync(file)) return undefined;
      mkdirSync(dir, { recursive: true });
      const secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'gw' } },
        type: 'Opaque',
        data: { [dataKey]: Buffer.from(randomBytes(24).toString('base64url')).toString('base64') },
      };
      writeFileSync(file, stringify(secret), { mode: 0o600, flag: 'wx' });
    } catch (e) {
      return `Secret ${namespace}/${name} does not exist and cannot be generated: ${(e as Error).message}`;
    }
    this.logger.info(
      { accessKey: keyName, secret: `${namespace}/${name}` },
      'generated a random key into a new Secret',
    );
    return undefined;
  }

  /** Concurrent writes in batches: the store client pipelines them (a resync of 3,000 keys is one burst). */
  private async writeSessions(writes: SessionWrite[]): Promise<void> {
    for (let b = 0; b < writes.length; b += WRITE_BATCH) {
      await Promise.all(
        writes.slice(b, b + WRITE_BATCH).map(async ([hash, stored, annotations, json]) => {
          const isNew = !this.written.has(hash);
          await this.sessions.put(hash, stored);
          this.written.set(hash, json);
          if (isNew) await this.onKeyAdded(hash, stored, annotations);
        }),
      );
    }
  }
}
