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
 */
import type { Redis, Cluster } from 'ioredis';
import { z } from 'zod';
import { KeySession } from '../crds/schemas/access-key.js';
import { throttledWarn } from '../lib/log-throttle.js';
import type { Logger } from '../lib/logger.js';
import {
  BACKGROUND_DEADLINE_MS,
  bounded,
  DEFAULT_STORE_DEADLINE_MS,
  isWrongType,
  StoreCalls,
  StoreUnavailableError,
  storeReady,
} from '../lib/store/store-calls.js';
import type { SessionStore, StoredSession } from './sessions.js';
import { closeStoreClient } from '../lib/store/redis.js';
import { allKeys } from '../lib/store/multi-key.js';

export const SESSION_PREFIX = 'gw:session:';
export const SESSION_CHANNEL = 'gw:sessions';

const StoredSessionSchema = z.object({ namespace: z.string(), name: z.string().optional(), session: KeySession });

export class RedisSessionStore implements SessionStore {
  private readonly cache = new Map<string, { value: StoredSession | undefined; at: number }>();
  private readonly listeners: ((keyHash: string) => void)[] = [];
  private sub?: Redis | Cluster;

  private readonly calls: StoreCalls;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly logger: Logger,
    private readonly cacheMs = 1000,
    deadlineMs = DEFAULT_STORE_DEADLINE_MS,
    /** What this process knows of a key without the store (standalone: the sessions of its directory). */
    private readonly known: (keyHash: string) => StoredSession | undefined = () => undefined,
  ) {
    this.calls = new StoreCalls(deadlineMs, storeReady(redis), throttledWarn(logger, 'session store error'));
  }

  /** Subscribe to change notifications (readers only). */
  async subscribe(): Promise<void> {
    // the subscriber's commands are off the request path: a store that never answers fails them after 5 s
    const sub =
      'nodes' in this.redis
        ? this.redis.duplicate()
        : this.redis.duplicate({ enableOfflineQueue: true, commandTimeout: BACKGROUND_DEADLINE_MS });
    this.sub = sub;
    sub.on('message', (_ch: string, hash: string) => {
      this.cache.delete(hash);
      for (const l of this.listeners) l(hash);
    });
    sub.on('error', () => undefined);
    await sub.subscribe(SESSION_CHANNEL);
  }

  peek(keyHash: string): StoredSession | null | undefined {
    const hit = this.cache.get(keyHash);
    if (hit === undefined || Date.now() - hit.at >= this.cacheMs) return undefined;
    return hit.value ?? null;
  }

  async get(keyHash: string): Promise<StoredSession | undefined> {
    const hit = this.cache.get(keyHash);
    const now = Date.now();
    if (hit && now - hit.at < this.cacheMs) return hit.value;
    return this.calls.guard(
      () => this.fetch(keyHash, now),
      () => {
        if (hit) return hit.value;
        const local = this.known(keyHash);
        if (local) return local;
        throw new StoreUnavailableError();
      },
    );
  }

  private async fetch(keyHash: string, now: number): Promise<StoredSession | undefined> {
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
    if (this.cache.size > 100_000) this.cache.clear();
    this.cache.set(keyHash, { value, at: now });
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
    this.cache.delete(keyHash);
  }

  async delete(keyHash: string): Promise<boolean> {
    const res = await bounded(
      this.redis
        .multi()
        .del(SESSION_PREFIX + keyHash)
        .publish(SESSION_CHANNEL, keyHash)
        .exec(),
    );
    this.cache.delete(keyHash);
    return Number(res?.[0]?.[1] ?? 0) > 0;
  }

  /** Every stored key hash (every master of a cluster is scanned). */
  async list(): Promise<string[]> {
    return (await allKeys(this.redis, `${SESSION_PREFIX}*`, 500)).map((k) => k.slice(SESSION_PREFIX.length));
  }

  onChange(listener: (keyHash: string) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    if (this.sub) await closeStoreClient(this.sub);
  }
}
