/**
 * A read-through cache of one kind of record in the shared store, in front of lookups on the request path:
 * every answer (found or not) is kept `cacheMs` in process, and dropped at once when a writer publishes the
 * record's key (or several, with `separator`) on the kind's channel (a missed notification still takes effect within `cacheMs`). Lookups run
 * under StoreCalls (no call while the connection is lost, a deadline); on store trouble the caller's fallback
 * answers, given the last entry seen however old (the store cannot tell of a change either).
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../logger.js';
import { throttledWarn } from '../log-throttle.js';
import { closeStoreClient } from './redis.js';
import { BACKGROUND_DEADLINE_MS, DEFAULT_STORE_DEADLINE_MS, StoreCalls, storeReady } from './store-calls.js';

type MaybePromise<T> = T | Promise<T>;

/** Entries kept at the most; past it the cache starts over (a flood of distinct unknown keys cannot grow it). */
const MAX_ENTRIES = 100_000;

export interface CachedLookupOptions {
  /** The channel writers publish a changed record's key on. */
  channel: string;
  /** What the records are, for the throttled warning of a store error ("session store error"). */
  what: string;
  /** How long an answer is kept (ms); 0: every lookup asks the store. */
  cacheMs?: number;
  /** Deadline of a lookup (ms). */
  deadlineMs?: number;
  /** A message may name several keys, separated by this (keys that never contain it: hashes, say). */
  separator?: string;
}

export interface CacheEntry<T> {
  value: T | undefined;
  at: number;
}

export class CachedLookup<T> {
  readonly calls: StoreCalls;
  readonly cacheMs: number;
  private readonly cache = new Map<string, CacheEntry<T>>();
  private readonly listeners: ((key: string) => void)[] = [];
  private readonly channel: string;
  private readonly separator?: string;
  private sub?: Redis | Cluster;

  constructor(
    private readonly redis: Redis | Cluster,
    logger: Logger,
    o: CachedLookupOptions,
  ) {
    this.channel = o.channel;
    if (o.separator) this.separator = o.separator;
    this.cacheMs = o.cacheMs ?? 1000;
    this.calls = new StoreCalls(
      o.deadlineMs ?? DEFAULT_STORE_DEADLINE_MS,
      storeReady(redis),
      throttledWarn(logger, `${o.what} store error`),
    );
  }

  /** The entry of `key` while it is fresh, else undefined. */
  fresh(key: string, now = Date.now()): CacheEntry<T> | undefined {
    const hit = this.cache.get(key);
    return hit !== undefined && now - hit.at < this.cacheMs ? hit : undefined;
  }

  /** The last entry of `key`, however old. */
  last(key: string): CacheEntry<T> | undefined {
    return this.cache.get(key);
  }

  /** The record while the cache knows it: null for "none"; undefined when only the store can tell. */
  peek(key: string): T | null | undefined {
    const hit = this.fresh(key);
    return hit === undefined ? undefined : (hit.value ?? null);
  }

  remember(key: string, value: T | undefined, at: number): void {
    if (this.cache.size > MAX_ENTRIES) this.cache.clear();
    this.cache.set(key, { value, at });
  }

  forget(key: string): void {
    this.cache.delete(key);
  }

  /** Drops every cached "none" answer (the store lost its data: each such key is asked again). */
  forgetMissing(): void {
    for (const [key, hit] of this.cache) if (hit.value === undefined) this.cache.delete(key);
  }

  /**
   * The record of `key`: from the cache while fresh, else `fetch()` (remembered); on store trouble
   * `fallback(last entry)` answers (it may throw).
   */
  get(
    key: string,
    fetch: () => Promise<T | undefined>,
    fallback: (last: CacheEntry<T> | undefined) => T | undefined,
  ): MaybePromise<T | undefined> {
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit !== undefined && now - hit.at < this.cacheMs) return hit.value;
    return this.calls.guard(
      async () => {
        const value = await fetch();
        this.remember(key, value, now);
        return value;
      },
      () => fallback(hit),
    );
  }

  /** Called with a key when its change is published (after the entry is dropped). */
  onChange(listener: (key: string) => void): void {
    this.listeners.push(listener);
  }

  /** Subscribes to the channel (readers): a published key drops its entry at once. */
  async subscribe(): Promise<void> {
    // the subscriber's commands are off the request path: a store that never answers fails them after 5 s
    const sub =
      'nodes' in this.redis
        ? this.redis.duplicate()
        : this.redis.duplicate({ enableOfflineQueue: true, commandTimeout: BACKGROUND_DEADLINE_MS });
    this.sub = sub;
    sub.on('message', (_ch: string, message: string) => {
      for (const key of this.separator ? message.split(this.separator) : [message]) {
        this.cache.delete(key);
        for (const l of this.listeners) l(key);
      }
    });
    sub.on('error', () => undefined);
    await sub.subscribe(this.channel);
  }

  async close(): Promise<void> {
    if (this.sub) await closeStoreClient(this.sub);
  }
}
