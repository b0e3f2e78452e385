/**
 * What a gateway keeps of the OAuth tokens it has issued or read, so that a store that lost its data
 * (FLUSHALL, an empty restart or failover) refuses no valid token (docs/contract.md#faults).
 *
 * Kept: the token hash and its record (no raw token), until the record's `exp`, at most `max` entries (an
 * LRU: the token least recently issued, read or answered from here goes first). A revocation (this
 * process's, or published by another) drops the entry.
 *
 * The store's loss is noticed by the process's StoreLossDetector (lib/store/store-loss.ts), whose
 * subscriber this keeper is: on a loss it writes every record it keeps back (same key, SET … EXAT exp NX,
 * in a script that skips a token with a revocation mark or a use mark, so a revoked or rotated token never
 * comes back). Within the detector's hold window (3 s) after the loss, a lookup that finds no token is not
 * final (stores/oauth/tokens-redis.ts): a kept record answers, and a token it does not keep is looked up
 * again once the window has passed (time for the other gateways to notice and write theirs back).
 */
import type { Redis, Cluster } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../../lib/logger.js';
import { bounded, BACKGROUND_DEADLINE_MS } from '../../lib/store/store-calls.js';
import { defineScript, luaScript, type ScriptRunner } from '../../lib/store/scripts.js';
import type { StoreLossDetector } from '../../lib/store/store-loss.js';
import { storeKeys } from '../../contract/store-keys.js';
import type { TokenRecord } from '../../contract/oauth/tokens.js';

export interface TokenKeeperOptions {
  /** The store's loss detector (started by its owner): a noticed loss writes the kept records back. */
  loss: StoreLossDetector;
  /** Records kept at the most. */
  max?: number;
}

/** SET the token back unless it was revoked or its (refresh) use was marked; never over an existing record. */
const WRITE_BACK = luaScript(import.meta.url, 'token-write-back.lua');

const nowSeconds = (): number => Date.now() / 1000;
const at = (exp: number): number => Math.max(1, Math.ceil(exp));

export class TokenKeeper {
  readonly loss: StoreLossDetector;
  /** Made on the first record: lru-cache allocates its index arrays for `max` entries up front. */
  private keptLru?: LRUCache<string, TokenRecord>;
  private readonly max: number;
  private readonly writeBackOne: ScriptRunner<number>;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly logger: Logger,
    o: TokenKeeperOptions,
  ) {
    this.loss = o.loss;
    this.max = o.max ?? 100_000;
    this.writeBackOne = defineScript(redis, 'gwOAuthWriteBack', 3, WRITE_BACK);
    this.unsubscribe = o.loss.subscribe(
      () =>
        void this.writeBack().catch((e: unknown) =>
          this.logger.warn({ err: (e as Error).message }, 'OAuth tokens not written back to the store'),
        ),
    );
  }

  /** No more write-backs (the detector itself is stopped by its owner). */
  stop(): void {
    this.unsubscribe();
  }

  keep(hash: string, rec: TokenRecord): void {
    if (rec.exp <= nowSeconds()) return;
    (this.keptLru ??= new LRUCache<string, TokenRecord>({ max: this.max })).set(hash, rec);
  }

  /** The kept record of `hash` while it has not expired. */
  record(hash: string): TokenRecord | undefined {
    const rec = this.keptLru?.get(hash);
    if (rec === undefined) return undefined;
    if (rec.exp > nowSeconds()) return rec;
    this.keptLru?.delete(hash);
    return undefined;
  }

  drop(hash: string): void {
    this.keptLru?.delete(hash);
  }

  dropFamily(fam: string): void {
    for (const h of this.family(fam)) this.keptLru?.delete(h);
  }

  /** The kept tokens of one family. */
  family(fam: string): string[] {
    const out: string[] = [];
    this.keptLru?.forEach((r, h) => {
      if (r.fam === fam) out.push(h);
    });
    return out;
  }

  get size(): number {
    return this.keptLru?.size ?? 0;
  }

  /** Writes every kept record back (skipping revoked and used tokens and records already there). */
  async writeBack(): Promise<number> {
    const started = Date.now();
    const entries = [...(this.keptLru?.entries() ?? [])];
    let written = 0;
    for (let i = 0; i < entries.length; i += 500) {
      const batch = entries.slice(i, i + 500).filter(([h, r]) => this.keptLru?.has(h) && r.exp > nowSeconds());
      const done = await bounded(
        Promise.all(
          batch.map(async ([h, r]) => {
            const n = await this.writeBackOne(
              [storeKeys.oauthToken(h), storeKeys.oauthRevoked(h), storeKeys.oauthRefreshUsed(h)],
              [JSON.stringify(r), at(r.exp)],
            );
            if (n !== 1) return 0;
            if (r.fam !== undefined) {
              const fk = storeKeys.oauthFamily(r.fam);
              await this.redis.multi().sadd(fk, h).expireat(fk, at(r.exp), 'GT').expireat(fk, at(r.exp), 'NX').exec();
            }
            return 1;
          }),
        ),
        BACKGROUND_DEADLINE_MS,
      );
      written += done.reduce((a: number, b) => a + b, 0);
    }
    if (entries.length)
      this.logger.info(
        { tokens: written, kept: entries.length, ms: Date.now() - started },
        'OAuth tokens written back',
      );
    return written;
  }
}
