/**
 * OAuth tokens in Redis (cluster; key layout in contract/store-keys.ts). Every key carries a TTL equal to
 * what is left of its record's life, so a token lives exactly as long as it should with no sweeper.
 * Lookups are cached in process for `cacheMs` (1 s, like sessions), positive and negative; a revocation is
 * published on `gw:oauth:tokens` and every gateway drops the hash at once. A store that cannot answer a
 * lookup: the last record seen is used, else the token is unknown (the caller answers 401/503).
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../../lib/logger.js';
import {
  BACKGROUND_DEADLINE_MS,
  bounded,
  DEFAULT_STORE_DEADLINE_MS,
  StoreCalls,
  StoreUnavailableError,
  storeReady,
} from '../../lib/store/store-calls.js';
import { throttledWarn } from '../../lib/log-throttle.js';
import { closeStoreClient } from '../../lib/store/redis.js';
import { OAUTH_TOKEN_CHANNEL, storeKeys } from '../store-keys.js';
import { CodeRecordSchema, TokenRecordSchema, type CodeRecord, type TokenRecord, type TokenStore } from './tokens.js';

/** Seconds from now until `exp` (unix s), at least 1 (Redis refuses an EX of 0). */
const ttl = (exp: number): number => Math.max(1, Math.ceil(exp - Date.now() / 1000));

function parse<T>(
  schema: { safeParse(v: unknown): { success: boolean; data?: T } },
  raw: string | null,
): T | undefined {
  if (raw === null) return undefined;
  try {
    const r = schema.safeParse(JSON.parse(raw));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

export class RedisTokenStore implements TokenStore {
  private readonly cache = new Map<string, { value: TokenRecord | undefined; at: number }>();
  private readonly listeners: ((hash: string) => void)[] = [];
  private readonly calls: StoreCalls;
  private sub?: Redis | Cluster;

  constructor(
    private readonly redis: Redis | Cluster,
    logger: Logger,
    private readonly cacheMs = 1000,
    deadlineMs = DEFAULT_STORE_DEADLINE_MS,
  ) {
    this.calls = new StoreCalls(deadlineMs, storeReady(redis), throttledWarn(logger, 'OAuth token store error'));
  }

  /** Subscribe to revocations (gateways). */
  async subscribe(): Promise<void> {
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
    await sub.subscribe(OAUTH_TOKEN_CHANNEL);
  }

  peek(hash: string): TokenRecord | null | undefined {
    const hit = this.cache.get(hash);
    if (hit === undefined || Date.now() - hit.at >= this.cacheMs) return undefined;
    return hit.value ?? null;
  }

  async get(hash: string): Promise<TokenRecord | undefined> {
    const hit = this.cache.get(hash);
    const now = Date.now();
    if (hit && now - hit.at < this.cacheMs) return hit.value;
    return this.calls.guard(
      async () => {
        const value = parse<TokenRecord>(TokenRecordSchema, await this.redis.get(storeKeys.oauthToken(hash)));
        if (this.cache.size > 100_000) this.cache.clear();
        this.cache.set(hash, { value, at: now });
        return value;
      },
      () => {
        if (hit) return hit.value;
        throw new StoreUnavailableError();
      },
    );
  }

  async put(hash: string, rec: TokenRecord): Promise<void> {
    const writes: Promise<unknown>[] = [
      this.redis.set(storeKeys.oauthToken(hash), JSON.stringify(rec), 'EX', ttl(rec.exp)),
    ];
    if (rec.fam !== undefined) {
      const fk = storeKeys.oauthFamily(rec.fam);
      // the family lives as long as its longest-lived token
      writes.push(
        this.redis.multi().sadd(fk, hash).expire(fk, ttl(rec.exp), 'GT').expire(fk, ttl(rec.exp), 'NX').exec(),
      );
    }
    await bounded(Promise.all(writes));
    this.cache.delete(hash);
  }

  async revoke(hash: string): Promise<TokenRecord | undefined> {
    const key = storeKeys.oauthToken(hash);
    const res = await bounded(this.redis.multi().get(key).del(key).exec());
    const rec = parse<TokenRecord>(TokenRecordSchema, (res?.[0]?.[1] as string | null | undefined) ?? null);
    await this.published(hash);
    return rec;
  }

  async revokeFamily(fam: string): Promise<number> {
    const fk = storeKeys.oauthFamily(fam);
    const hashes = await bounded(this.redis.smembers(fk));
    let n = 0;
    for (const h of hashes) n += await bounded(this.redis.del(storeKeys.oauthToken(h)));
    await bounded(this.redis.del(fk));
    for (const h of hashes) await this.published(h);
    return n;
  }

  /** Nothing to enumerate: a deleted client's tokens fail the client lookup (the record is gone or has another uid). */
  async revokeClient(): Promise<number> {
    return 0;
  }

  async useRefresh(hash: string, fam: string, exp: number): Promise<boolean> {
    const r = await bounded(this.redis.set(storeKeys.oauthRefreshUsed(hash), fam, 'EX', ttl(exp), 'NX'));
    return r === 'OK';
  }

  async refreshFamily(hash: string): Promise<string | undefined> {
    return (await bounded(this.redis.get(storeKeys.oauthRefreshUsed(hash)))) ?? undefined;
  }

  async putCode(hash: string, rec: CodeRecord): Promise<void> {
    await bounded(this.redis.set(storeKeys.oauthCode(hash), JSON.stringify(rec), 'EX', ttl(rec.exp)));
  }

  async takeCode(hash: string): Promise<CodeRecord | undefined> {
    const key = storeKeys.oauthCode(hash);
    const res = await bounded(this.redis.multi().get(key).del(key).exec());
    const rec = parse<CodeRecord>(CodeRecordSchema, (res?.[0]?.[1] as string | null | undefined) ?? null);
    return rec && rec.exp > Date.now() / 1000 ? rec : undefined;
  }

  async markCodeUsed(hash: string, fam: string, exp: number): Promise<void> {
    await bounded(this.redis.set(storeKeys.oauthCodeUsed(hash), fam, 'EX', ttl(exp)));
  }

  async codeFamily(hash: string): Promise<string | undefined> {
    return (await bounded(this.redis.get(storeKeys.oauthCodeUsed(hash)))) ?? undefined;
  }

  onRevoke(listener: (hash: string) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    if (this.sub) await closeStoreClient(this.sub);
  }

  private async published(hash: string): Promise<void> {
    this.cache.delete(hash);
    await bounded(this.redis.publish(OAUTH_TOKEN_CHANNEL, hash)).catch(() => undefined);
  }
}
