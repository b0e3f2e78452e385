/**
 * Sessions in Redis (cluster mode): `gw:session:<hash>` holds the JSON session, validated with zod
 * when read; every change is published on `gw:sessions` so sidecar caches drop it at once. Readers
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
 * contract/store-keys.ts), "no such session" is trusted only while a marker says `ready:` (read after the
 * session, so a flush between the two cannot pass for a complete store) — or when the detector never saw a
 * marker at all (a store no controller manages). Otherwise a key seen before keeps its last session, and a
 * key not seen before waits for the restore (up to `holdMs`, one wait shared by every waiting request), then
 * is looked up again; a restore that takes longer answers StoreUnavailableError (503). With a restorer, a
 * lookup of a key not seen before while the store is unreachable waits the same way (a store restarted empty
 * is unreachable first). As the detector's subscriber, a noticed loss drops the cached "no such session"
 * answers, so each such key is asked again. Standalone passes `known` instead: its directory is the source of
 * truth, so a key of the directory is never refused for a missing session.
 */
import type { Redis, Cluster } from 'ioredis';
import { z } from 'zod';
import { KeySession } from '../crds/schemas/access-key.js';
import type { Logger } from '../lib/logger.js';
import { bounded, isWrongType, StoreUnavailableError } from '../lib/store/store-calls.js';
import { CachedLookup } from '../lib/store/cached-lookup.js';
import type { SessionStore, StoredSession } from './sessions.js';
import type { StoreLossDetector } from '../lib/store/store-loss.js';
import { allKeys } from '../lib/store/multi-key.js';

export const SESSION_PREFIX = 'gw:session:';
export const SESSION_CHANNEL = 'gw:sessions';

const StoredSessionSchema = z.object({ namespace: z.string(), name: z.string().optional(), session: KeySession });

/** A lookup found no session while the store is being restored: not an answer yet. */
const RESTORING = Symbol('restoring');

export interface RedisSessionStoreOptions {
  /** Entries of the in-process cache expire after this (ms). */
  cacheMs?: number;
  /** Deadline of a lookup on the request path (ms). */
  deadlineMs?: number;
  /** What this process knows of a key without the store (standalone: the sessions of its directory). */
  known?: (keyHash: string) => StoredSession | undefined;
  /** The store's loss detector with the controllers' markers; none: a miss is always trusted. */
  loss?: StoreLossDetector;
  /** How long a lookup of a key not seen before waits for a store being restored (ms). */
  holdMs?: number;
}

export class RedisSessionStore implements SessionStore {
  private readonly lookups: CachedLookup<StoredSession>;
  private readonly known: (keyHash: string) => StoredSession | undefined;
  /** The detector, when it reads the markers of a controller that restores the store. */
  private readonly restorer?: StoreLossDetector;
  private readonly holdMs: number;
  private readonly unsubscribe?: () => void;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly logger: Logger,
    o: RedisSessionStoreOptions | number = {},
  ) {
    const opts = typeof o === 'number' ? { cacheMs: o } : o;
    this.known = opts.known ?? (() => undefined);
    if (opts.loss?.hasRestorer) this.restorer = opts.loss;
    this.holdMs = opts.holdMs ?? 5000;
    this.lookups = new CachedLookup(redis, logger, {
      channel: SESSION_CHANNEL,
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
    return this.lookups.peek(keyHash);
  }

  async get(keyHash: string): Promise<StoredSession | undefined> {
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
    let raw: string | null;
    try {
      raw = await this.redis.get(SESSION_PREFIX + keyHash);
    } catch (e) {
      if (!(e instanceof Error && isWrongType(e))) throw e;
      this.logger.error({ keyHash: keyHash.slice(0, 12) }, 'session in Redis refused: the key is not a string');
      raw = null;
    }
    let value: StoredSession | undefined;
    if (raw !== null) {
      try {
        const parsed = StoredSessionSchema.safeParse(JSON.parse(raw));
        if (parsed.success) value = parsed.data;
        else
          this.logger.error(
            { keyHash: keyHash.slice(0, 12) },
            `session in Redis refused: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`,
          );
      } catch {
        this.logger.error({ keyHash: keyHash.slice(0, 12) }, 'session in Redis is not JSON; refused');
      }
    }
    if (raw === null) {
      // no session: the directory's (standalone), else trusted only from a complete store
      value = this.known(keyHash);
      if (value === undefined && this.restorer && !(await this.restorer.restored())) {
        if (seen === undefined) return RESTORING;
        value = seen; // the last session seen, until the controller has restored the store
      }
    }
    this.lookups.remember(keyHash, value, now);
    return value;
  }

  async put(keyHash: string, value: StoredSession): Promise<void> {
    await bounded(
      this.redis
        .multi()
        .set(SESSION_PREFIX + keyHash, JSON.stringify(value))
        .publish(SESSION_CHANNEL, keyHash)
        .exec(),
    );
    this.lookups.forget(keyHash);
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
