/**
 * OAuth tokens in Redis (cluster; key layout in contract/store-keys.ts). Every key expires at its record's
 * `exp` (EXAT), so a token lives exactly as long as it should with no sweeper.
 * Lookups are cached in process for `cacheMs` (1 s, like sessions), positive and negative; a revocation is
 * published on `gw:oauth:tokens` and every gateway drops the hash at once. A store that cannot answer a
 * lookup: the last record seen is used, else the token is unknown (the caller answers 401/503).
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../../lib/logger.js';
import { bounded, DEFAULT_STORE_DEADLINE_MS, StoreUnavailableError } from '../../lib/store/store-calls.js';
import { CachedLookup } from '../../lib/store/cached-lookup.js';
import { OAUTH_TOKEN_CHANNEL, storeKeys } from '../store-keys.js';
import { CodeRecordSchema, TokenRecordSchema, type CodeRecord, type TokenRecord, type TokenStore } from './tokens.js';

/** The unix second a key expires at (EXAT): its record's `exp`, so the key lives exactly as long as the record. */
const at = (exp: number): number => Math.max(1, Math.ceil(exp));

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
  private readonly lookups: CachedLookup<TokenRecord>;

  constructor(
    private readonly redis: Redis | Cluster,
    logger: Logger,
    cacheMs = 1000,
    deadlineMs = DEFAULT_STORE_DEADLINE_MS,
  ) {
    this.lookups = new CachedLookup(redis, logger, {
      channel: OAUTH_TOKEN_CHANNEL,
      what: 'OAuth token',
      cacheMs,
      deadlineMs,
    });
  }

  /** Subscribe to revocations (gateways). */
  subscribe(): Promise<void> {
    return this.lookups.subscribe();
  }

  peek(hash: string): TokenRecord | null | undefined {
    return this.lookups.peek(hash);
  }

  async get(hash: string): Promise<TokenRecord | undefined> {
    return this.lookups.get(
      hash,
      async () => parse<TokenRecord>(TokenRecordSchema, await this.redis.get(storeKeys.oauthToken(hash))),
      (last) => {
        if (last) return last.value;
        throw new StoreUnavailableError();
      },
    );
  }

  async put(hash: string, rec: TokenRecord): Promise<void> {
    const writes: Promise<unknown>[] = [
      this.redis.set(storeKeys.oauthToken(hash), JSON.stringify(rec), 'EXAT', at(rec.exp)),
    ];
    if (rec.fam !== undefined) {
      const fk = storeKeys.oauthFamily(rec.fam);
      // the family lives as long as its longest-lived token
      writes.push(
        this.redis.multi().sadd(fk, hash).expireat(fk, at(rec.exp), 'GT').expireat(fk, at(rec.exp), 'NX').exec(),
      );
    }
    await bounded(Promise.all(writes));
    this.lookups.forget(hash);
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
    const r = await bounded(this.redis.set(storeKeys.oauthRefreshUsed(hash), fam, 'EXAT', at(exp), 'NX'));
    return r === 'OK';
  }

  async refreshFamily(hash: string): Promise<string | undefined> {
    return (await bounded(this.redis.get(storeKeys.oauthRefreshUsed(hash)))) ?? undefined;
  }

  async putCode(hash: string, rec: CodeRecord): Promise<void> {
    await bounded(this.redis.set(storeKeys.oauthCode(hash), JSON.stringify(rec), 'EXAT', at(rec.exp)));
  }

  async takeCode(hash: string): Promise<CodeRecord | undefined> {
    const key = storeKeys.oauthCode(hash);
    const res = await bounded(this.redis.multi().get(key).del(key).exec());
    const rec = parse<CodeRecord>(CodeRecordSchema, (res?.[0]?.[1] as string | null | undefined) ?? null);
    return rec && rec.exp > Date.now() / 1000 ? rec : undefined;
  }

  async markCodeUsed(hash: string, fam: string, exp: number): Promise<void> {
    await bounded(this.redis.set(storeKeys.oauthCodeUsed(hash), fam, 'EXAT', at(exp)));
  }

  async codeFamily(hash: string): Promise<string | undefined> {
    return (await bounded(this.redis.get(storeKeys.oauthCodeUsed(hash)))) ?? undefined;
  }

  onRevoke(listener: (hash: string) => void): void {
    this.lookups.onChange(listener);
  }

  close(): Promise<void> {
    return this.lookups.close();
  }

  private async published(hash: string): Promise<void> {
    this.lookups.forget(hash);
    await bounded(this.redis.publish(OAUTH_TOKEN_CHANNEL, hash)).catch(() => undefined);
  }
}
