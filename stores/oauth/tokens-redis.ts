/**
 * OAuth tokens in Redis (cluster; key layout in contract/store-keys.ts). Every key expires at its record's
 * `exp` (EXAT), so a token lives exactly as long as it should with no sweeper.
 * Lookups are cached in process for `cacheMs` (1 s, like sessions), positive and negative; a revocation is
 * published on `gw:oauth:tokens` and every gateway drops the hash at once. A store that cannot answer a
 * lookup: the last record seen is used, else the token is unknown (the caller answers 401/503).
 *
 * With `keep` (gateways), the records issued or read are kept in process and written back when the store
 * lost its data (stores/oauth/token-keeper.ts, told by the process's StoreLossDetector): a missing token is
 * not final within the detector's hold window after a loss. A revocation leaves a mark until the token's exp, so no gateway writes it back.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../../lib/logger.js';
import { bounded, DEFAULT_STORE_DEADLINE_MS, StoreUnavailableError } from '../../lib/store/store-calls.js';
import { CachedLookup } from '../../lib/store/cached-lookup.js';
import { TokenKeeper, type TokenKeeperOptions } from './token-keeper.js';
import { defineScript, luaScript, type ScriptRunner } from '../../lib/store/scripts.js';
import { OAUTH_TOKEN_CHANNEL, storeKeys } from '../../contract/store-keys.js';
import {
  CodeRecordSchema,
  TokenRecordSchema,
  type CodeRecord,
  type TokenRecord,
  type TokenStore,
} from '../../contract/oauth/tokens.js';

/** The unix second a key expires at (EXAT): its record's `exp`, so the key lives exactly as long as the record. */
const at = (exp: number): number => Math.max(1, Math.ceil(exp));

/** A revocation mark of a token whose exp is unknown lives this long (s). */
const REVOKED_UNKNOWN_EXP_S = 86_400;

/** Published on the token channel when a family is revoked, so that gateways drop the kept records of it. */
const FAMILY_PREFIX = 'fam:';

/** A client's live tokens of one kind bounded, the oldest popped (docs/oauth.md, "Tokens per client"). */
const TOKEN_BOUND = luaScript(import.meta.url, 'token-bound.lua');

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
  private readonly boundScript: ScriptRunner<string[]>;
  /** The records this gateway holds for a store that lost its data; undefined: none kept. */
  readonly keeper?: TokenKeeper;

  constructor(
    private readonly redis: Redis | Cluster,
    logger: Logger,
    cacheMs = 1000,
    deadlineMs = DEFAULT_STORE_DEADLINE_MS,
    keep?: TokenKeeperOptions,
    /** The clock of the bound's order (tests: gateways whose clocks disagree, tokens issued in one ms). */
    private readonly nowMs: () => number = Date.now,
  ) {
    this.boundScript = defineScript(redis, 'gwOAuthTokenBound', 1, TOKEN_BOUND);
    this.lookups = new CachedLookup(redis, logger, {
      channel: OAUTH_TOKEN_CHANNEL,
      what: 'OAuth token',
      cacheMs,
      deadlineMs,
    });
    if (keep) {
      const keeper = new TokenKeeper(redis, logger, keep);
      this.keeper = keeper;
      this.lookups.onChange((key) =>
        key.startsWith(FAMILY_PREFIX) ? keeper.dropFamily(key.slice(FAMILY_PREFIX.length)) : keeper.drop(key),
      );
    }
  }

  /** Subscribe to revocations (gateways). */
  subscribe(): Promise<void> {
    return this.lookups.subscribe();
  }

  peek(hash: string): TokenRecord | null | undefined {
    return this.lookups.peek(hash);
  }

  async get(hash: string): Promise<TokenRecord | undefined> {
    const keeper = this.keeper;
    const found = await this.lookups.get(
      hash,
      () => this.fetch(hash),
      (last) => {
        const kept = keeper?.record(hash);
        if (kept) return kept;
        if (last) return last.value;
        throw new StoreUnavailableError();
      },
    );
    if (found !== undefined || !keeper?.loss.holding()) return found;
    // a token this gateway does not keep, missing from a store that lost its data: the other gateways
    // write theirs back meanwhile; looked up again once the window has passed
    await keeper.loss.holdOver();
    const again = await bounded(this.fetch(hash));
    this.lookups.remember(hash, again, Date.now());
    return again;
  }

  /** The store's record (kept); a missing one answered from what this gateway keeps while the store is lost. */
  private async fetch(hash: string): Promise<TokenRecord | undefined> {
    const rec = parse<TokenRecord>(TokenRecordSchema, await this.redis.get(storeKeys.oauthToken(hash)));
    const keeper = this.keeper;
    if (!keeper) return rec;
    if (rec !== undefined) {
      keeper.keep(hash, rec);
      return rec;
    }
    await keeper.loss.check();
    if (keeper.loss.holding()) return keeper.record(hash);
    keeper.drop(hash); // a complete store says no such token: revoked or expired
    return undefined;
  }

  async put(hash: string, rec: TokenRecord, maxPerClient?: number): Promise<void> {
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
    this.keeper?.keep(hash, rec);
    if (maxPerClient !== undefined) await this.bound(hash, rec, maxPerClient);
  }

  /**
   * The client's live tokens of rec's kind, bounded (token-bound.lua, one script on one key, so Redis
   * Cluster takes it): the new one entered in the client's set above every other (score: its expiry to the
   * ms of issuance, raised above the newest when not above it), the expired dropped, and past the bound
   * the oldest popped; they are revoked here.
   */
  private async bound(hash: string, rec: TokenRecord, max: number): Promise<void> {
    const ck = storeKeys.oauthClientTokens(rec.kind, rec.ns, rec.api_id, rec.client_id);
    const nowS = this.nowMs() / 1000;
    const oldest = await bounded(this.boundScript([ck], [hash, nowS + (rec.exp - rec.iat), nowS, max]));
    await Promise.all(oldest.map((h) => this.revoke(h)));
  }

  async revoke(hash: string): Promise<TokenRecord | undefined> {
    const rec = await this.remove(hash);
    await this.published(hash);
    return rec;
  }

  async revokeFamily(fam: string): Promise<number> {
    const fk = storeKeys.oauthFamily(fam);
    const hashes = new Set(await bounded(this.redis.smembers(fk)));
    // a store that lost the family set: the members this gateway keeps
    if (this.keeper) for (const h of this.keeper.family(fam)) hashes.add(h);
    // the members' deletes, and then their messages, are sent together: one round trip's wait, not one per token
    const removed = await Promise.all([...hashes].map((h) => this.remove(h)));
    await bounded(this.redis.del(fk));
    this.keeper?.dropFamily(fam);
    await bounded(this.redis.publish(OAUTH_TOKEN_CHANNEL, FAMILY_PREFIX + fam)).catch(() => undefined);
    await Promise.all([...hashes].map((h) => this.published(h)));
    return removed.filter((r) => r !== undefined).length;
  }

  /** Deletes a token and marks it revoked until its exp (known from the store or this gateway). */
  private async remove(hash: string): Promise<TokenRecord | undefined> {
    const key = storeKeys.oauthToken(hash);
    const kept = this.keeper?.record(hash);
    this.keeper?.drop(hash);
    const res = await bounded(this.redis.multi().get(key).del(key).exec());
    const rec = parse<TokenRecord>(TokenRecordSchema, (res?.[0]?.[1] as string | null | undefined) ?? null);
    const exp = rec?.exp ?? kept?.exp;
    const owner = rec ?? kept;
    await bounded(
      Promise.all([
        this.redis.set(
          storeKeys.oauthRevoked(hash),
          '1',
          'EXAT',
          exp !== undefined ? at(exp) : Math.ceil(Date.now() / 1000) + REVOKED_UNKNOWN_EXP_S,
        ),
        // out of its client's bound set, so that it no longer counts as live
        owner !== undefined
          ? this.redis.zrem(storeKeys.oauthClientTokens(owner.kind, owner.ns, owner.api_id, owner.client_id), hash)
          : undefined,
      ]),
    );
    return rec;
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
    this.keeper?.stop();
    return this.lookups.close();
  }

  /** After remove(), which already dropped the kept record: the cache entry here, then every other gateway's. */
  private async published(hash: string): Promise<void> {
    this.lookups.forget(hash);
    await bounded(this.redis.publish(OAUTH_TOKEN_CHANNEL, hash)).catch(() => undefined);
  }
}
