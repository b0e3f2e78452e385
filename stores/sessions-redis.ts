/**
 * Sessions in Redis (cluster mode): `gw:session:<hash>` holds the JSON session, validated with zod
 * when read; every change is published on `gw:sessions` (one hash, or several space-separated for puts
 * written together) so sidecar caches drop it at once. Readers
 * keep a small in-process cache whose entries also expire after `cacheMs` (1 s), so a missed
 * notification still takes effect within a second.
 *
 * Store trouble on a lookup (connection lost, no answer within the deadline, an error) answers with the
 * last session seen for the key, however old (the store cannot tell of a change either), else with what
 * the process knows of the key by itself (standalone: its directory's sessions), and without either
 * rejects with a StoreUnavailableError, which the gateway answers 503. A key of the wrong Redis
 * type is bad store content: logged, and the key is unknown (403), like a session that fails the schema.
 *
 * A store that lost its data (FLUSHALL, an empty restart or failover) answers "no such session" for
 * every key until the controller has restored it. With `loss` (the process's StoreLossDetector,
 * lib/store/store-loss.ts, reading the store markers of the controllers whose sessions this gateway serves,
 * contract/store-keys.ts), "no such session" is trusted only while a marker says `ready:` (the session read
 * again between two equal marker reads, so neither a flush nor a restore finishing meanwhile passes for a
 * complete store's answer) — or when the detector never saw a
 * marker at all (a store no controller manages). Otherwise a key seen before keeps its last session, and a
 * key not seen before waits for the restore (up to `holdMs`, one wait shared by every waiting request), then
 * is looked up again; a restore that takes longer answers StoreUnavailableError (503). With a restorer, a
 * lookup of a key not seen before while the store is unreachable waits the same way (a store restarted empty
 * is unreachable first). As the detector's subscriber, a noticed loss drops the cached "no such session"
 * answers, so each such key is asked again. Standalone passes `known` instead: its directory is the source of
 * truth, so a key of the directory is never refused for a missing session; with `knownFirst` a key of the
 * directory is answered from memory without a store read (the per-request cost does not grow with the number
 * of keys, which a 1 s cache in front of the store would: a key seen less often than once a second is a read).
 */
import type { Redis, Cluster } from 'ioredis';
import { z } from 'zod';
import { KeySession } from '../crds/schemas/access-key.js';
import type { Logger } from '../lib/logger.js';
import { bounded, isWrongType, StoreUnavailableError } from '../lib/store/store-calls.js';
import { CachedLookup } from '../lib/store/cached-lookup.js';
import { SESSION_CHANNEL, SESSION_PREFIX, type SessionStore, type StoredSession } from '../contract/sessions.js';
import type { StoreLossDetector } from '../lib/store/store-loss.js';
import { allKeys } from '../lib/store/multi-key.js';

/** A message on SESSION_CHANNEL names one hash, or several separated by this. */
const HASH_SEPARATOR = ' ';
/** Sessions written together at the most (one MSET on a single server). */
const PUT_BATCH = 1000;

interface PutBatch {
  entries: [hash: string, json: string][];
  done: Promise<void>;
}

const StoredSessionSchema = z.object({ namespace: z.string(), name: z.string().optional(), session: KeySession });

/** A lookup found no session while the store is being restored: not an answer yet. */
const RESTORING = Symbol('restoring');
/** A miss the store's markers cannot confirm (a restore under way or finished meanwhile). */
const UNTRUSTED = Symbol('untrusted');

export interface RedisSessionStoreOptions {
  /** Entries of the in-process cache expire after this (ms). */
  cacheMs?: number;
  /** Deadline of a lookup on the request path (ms). */
  deadlineMs?: number;
  /** What this process knows of a key without the store (standalone: the sessions of its directory). */
  known?: (keyHash: string) => StoredSession | undefined;
  /**
   * `known` is the source of truth (standalone: the directory, which this process itself writes to the
   * store): a key it knows is answered from it without the store or the cache; the store is asked only
   * for keys it does not know.
   */
  knownFirst?: boolean;
  /** The store's loss detector with the controllers' markers; none: a miss is always trusted. */
  loss?: StoreLossDetector;
  /** How long a lookup of a key not seen before waits for a store being restored (ms). */
  holdMs?: number;
}

export class RedisSessionStore implements SessionStore {
  private readonly lookups: CachedLookup<StoredSession>;
  private readonly known: (keyHash: string) => StoredSession | undefined;
  private readonly knownFirst: boolean;
  /** The detector, when it reads the markers of a controller that restores the store. */
  private readonly restorer?: StoreLossDetector;
  private readonly holdMs: number;
  private readonly unsubscribe?: () => void;
  /** The puts of this turn of the event loop, written together. */
  private batch?: PutBatch;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly logger: Logger,
    o: RedisSessionStoreOptions | number = {},
  ) {
    const opts = typeof o === 'number' ? { cacheMs: o } : o;
    this.known = opts.known ?? (() => undefined);
    this.knownFirst = opts.knownFirst === true && opts.known !== undefined;
    if (opts.loss?.hasRestorer) this.restorer = opts.loss;
    this.holdMs = opts.holdMs ?? 5000;
    this.lookups = new CachedLookup(redis, logger, {
      channel: SESSION_CHANNEL,
      separator: HASH_SEPARATOR,
      what: 'session',
      ...(opts.cacheMs !== undefined ? { cacheMs: opts.cacheMs } : {}),
      ...(opts.deadlineMs !== undefined ? { deadlineMs: opts.deadlineMs } : {}),
    });
    this.unsubscribe = opts.loss?.subscribe(() => this.lookups.forgetMissing());
  }

  /** Subscribe to change notifications (readers only). */
  subscribe(): Promise<void> {
    return this.lookups.subscribe();
  }

  peek(keyHash: string): StoredSession | null | undefined {
    if (this.knownFirst) {
      const own = this.known(keyHash);
      if (own) return own;
    }
    return this.lookups.peek(keyHash);
  }

  async get(keyHash: string): Promise<StoredSession | undefined> {
    if (this.knownFirst) {
      const own = this.known(keyHash);
      if (own) return own;
    }
    const now = Date.now();
    const fresh = this.lookups.fresh(keyHash, now);
    if (fresh) return fresh.value;
    const found = await this.lookup(keyHash, now, this.lookups.last(keyHash));
    if (found !== RESTORING) return found;
    // a key not seen before while the store is restored: held until it is complete, then looked up again
    if (await this.restorer?.waitRestored(this.holdMs)) {
      const again = await this.lookup(keyHash, Date.now(), undefined);
      if (again !== RESTORING) return again;
    }
    throw new StoreUnavailableError();
  }

  private lookup(
    keyHash: string,
    now: number,
    hit: { value: StoredSession | undefined } | undefined,
  ): Promise<StoredSession | undefined | typeof RESTORING> {
    return Promise.resolve(
      this.lookups.calls.guard<StoredSession | undefined | typeof RESTORING>(
        () => this.fetch(keyHash, now, hit?.value),
        () => {
          if (hit) return hit.value;
          const local = this.known(keyHash);
          if (local) return local;
          // a gateway of a restored store holds the lookup for the store's return (an empty restart)
          if (this.restorer) return RESTORING;
          throw new StoreUnavailableError();
        },
      ),
    );
  }

  private async fetch(
    keyHash: string,
    now: number,
    seen: StoredSession | undefined,
  ): Promise<StoredSession | undefined | typeof RESTORING> {
    let value = this.parse(keyHash, await this.read(keyHash));
    if (value === null) {
      // no session: the directory's (standalone), else trusted only from a complete store
      value = this.known(keyHash);
      if (value === undefined && this.restorer) {
        const again = await this.confirmMiss(keyHash, this.restorer);
        if (again === UNTRUSTED) {
          if (seen === undefined) return RESTORING;
          value = seen; // the last session seen, until the controller has restored the store
        } else value = again ?? undefined;
      }
    }
    this.lookups.remember(keyHash, value, now);
    return value;
  }

  /**
   * A miss is trusted when the session is still missing when read again between two reads of the markers
   * that both say the store is complete and are equal: a flush between them removes the marker, a restore
   * that finished between them writes another restore id, and the first read alone could have met an
   * emptied store that was restored just after it (the gateway and the controller reconnect together).
   * Answers the session found by the second read, null for a trusted miss, UNTRUSTED otherwise.
   */
  private async confirmMiss(
    keyHash: string,
    restorer: StoreLossDetector,
  ): Promise<StoredSession | undefined | null | typeof UNTRUSTED> {
    const before = await restorer.markerState();
    if (!before.complete) return UNTRUSTED;
    const again = this.parse(keyHash, await this.read(keyHash));
    if (again !== null) return again; // restored meanwhile
    const after = await restorer.markerState();
    return after.complete && after.values === before.values ? null : UNTRUSTED;
  }

  private async read(keyHash: string): Promise<string | null> {
    try {
      return await this.redis.get(SESSION_PREFIX + keyHash);
    } catch (e) {
      if (!(e instanceof Error && isWrongType(e))) throw e;
      this.logger.error({ keyHash: keyHash.slice(0, 12) }, 'session in Redis refused: the key is not a string');
      return null;
    }
  }

  /** The stored session, undefined for content refused (logged), null for none. */
  private parse(keyHash: string, raw: string | null): StoredSession | undefined | null {
    if (raw === null) return null;
    try {
      const parsed = StoredSessionSchema.safeParse(JSON.parse(raw));
      if (parsed.success) return parsed.data;
      this.logger.error(
        { keyHash: keyHash.slice(0, 12) },
        `session in Redis refused: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`,
      );
    } catch {
      this.logger.error({ keyHash: keyHash.slice(0, 12) }, 'session in Redis is not JSON; refused');
    }
    return undefined;
  }

  /**
   * Writes a session and publishes its hash. Puts made in the same turn of the event loop (a bulk apply or
   * restore issues hundreds at once) go out together, up to PUT_BATCH: on a single server one transaction
   * of one MSET and one PUBLISH naming every hash (space-separated); on a cluster, whose keys lie in
   * different hash slots, one transaction per session, pipelined by the client. Every put of a batch
   * settles with it.
   */
  put(keyHash: string, value: StoredSession): Promise<void> {
    let batch = this.batch;
    if (!batch) {
      const b: PutBatch = { entries: [], done: Promise.resolve() };
      b.done = new Promise<void>((r) => queueMicrotask(r)).then(() => {
        if (this.batch === b) this.batch = undefined;
        return this.write(b.entries);
      });
      this.batch = batch = b;
    }
    batch.entries.push([keyHash, JSON.stringify(value)]);
    if (batch.entries.length >= PUT_BATCH) this.batch = undefined;
    return batch.done.then(() => this.lookups.forget(keyHash));
  }

  private async write(entries: [string, string][]): Promise<void> {
    if ('nodes' in this.redis) {
      const cluster = this.redis;
      await bounded(
        Promise.all(
          entries.map(([hash, json]) =>
            cluster
              .multi()
              .set(SESSION_PREFIX + hash, json)
              .publish(SESSION_CHANNEL, hash)
              .exec(),
          ),
        ),
      );
      return;
    }
    const kv: string[] = [];
    for (const [hash, json] of entries) kv.push(SESSION_PREFIX + hash, json);
    await bounded(
      this.redis
        .multi()
        .mset(kv)
        .publish(SESSION_CHANNEL, entries.map(([hash]) => hash).join(HASH_SEPARATOR))
        .exec(),
    );
  }

  async delete(keyHash: string): Promise<boolean> {
    const res = await bounded(
      this.redis
        .multi()
        .del(SESSION_PREFIX + keyHash)
        .publish(SESSION_CHANNEL, keyHash)
        .exec(),
    );
    this.lookups.forget(keyHash);
    return Number(res?.[0]?.[1] ?? 0) > 0;
  }

  /** Every stored key hash (every master of a cluster is scanned). */
  async list(): Promise<string[]> {
    return (await allKeys(this.redis, `${SESSION_PREFIX}*`, 500)).map((k) => k.slice(SESSION_PREFIX.length));
  }

  onChange(listener: (keyHash: string) => void): void {
    this.lookups.onChange(listener);
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.lookups.close();
  }
}
