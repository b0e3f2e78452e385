/**
 * What a gateway keeps of the OAuth tokens it has issued or read, so that a store that lost its data
 * (FLUSHALL, an empty restart or failover) refuses no valid token (SPEC.md §6).
 *
 * Kept: the token hash and its record (no raw token), until the record's `exp`, at most `max` entries
 * (an LRU: the token least recently issued, read or answered from here goes first). A revocation (this process's, or published by another) drops the entry.
 *
 * Loss is told by `gw:oauth:epoch` (contract/store-keys.ts): a random id set (NX) when missing. A gateway
 * remembers the id it saw; the key missing or holding another id means the store lost its data since. The
 * key is read every `pollMs` (1 s), on every reconnect, and after a lookup finds no token (read after the
 * token, so a flush between the two cannot pass for a complete store). On a loss the gateway sets a new
 * id and writes every record it keeps back (same key, SET … EXAT exp NX, in a script that skips a token
 * with a revocation mark or a use mark, so a revoked or rotated token never comes back). For `holdMs` (3 s)
 * after it noticed the loss, a lookup that finds no token is not final: a kept record answers, and a token
 * it does not keep is looked up again once the window has passed (time for the other gateways to notice
 * and write theirs back).
 */
import type { Redis, Cluster } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../../lib/logger.js';
import { bounded, BACKGROUND_DEADLINE_MS } from '../../lib/store/store-calls.js';
import { defineScript, luaScript, type ScriptRunner } from '../../lib/store/scripts.js';
import { storeKeys } from '../store-keys.js';
import type { TokenRecord } from './tokens.js';

const { randomBytes } = process.getBuiltinModule('node:crypto');

export interface TokenKeeperOptions {
  /** How often the store epoch is read (ms). */
  pollMs?: number;
  /** How long after a loss a missing token is not taken for an unknown one (ms). */
  holdMs?: number;
  /** Records kept at the most. */
  max?: number;
}

/** SET the token back unless it was revoked or its (refresh) use was marked; never over an existing record. */
const WRITE_BACK = luaScript(import.meta.url, 'token-write-back.lua');

const nowSeconds = (): number => Date.now() / 1000;
const at = (exp: number): number => Math.max(1, Math.ceil(exp));

export class TokenKeeper {
  /** Made on the first record: lru-cache allocates its index arrays for `max` entries up front. */
  private keptLru?: LRUCache<string, TokenRecord>;
  private readonly pollMs: number;
  readonly holdMs: number;
  private readonly max: number;
  /** The epoch id this process last saw; undefined before the first read. */
  private epoch?: string;
  /** When this process noticed the store lost its data (ms; 0: never). */
  private lostAt = 0;
  private checking?: Promise<boolean>;
  private timer?: NodeJS.Timeout;
  private readonly onReady = (): void => void this.check().catch(() => undefined);
  private readonly writeBackOne: ScriptRunner<number>;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly logger: Logger,
    o: TokenKeeperOptions = {},
  ) {
    this.pollMs = o.pollMs ?? 1000;
    this.holdMs = o.holdMs ?? 3000;
    this.max = o.max ?? 100_000;
    this.writeBackOne = defineScript(redis, 'gwOAuthWriteBack', 3, WRITE_BACK);
  }

  /** Starts the background epoch reads (every pollMs and on every reconnect). */
  start(): void {
    this.timer = setInterval(this.onReady, this.pollMs);
    this.timer.unref();
    this.redis.on('ready', this.onReady);
    this.onReady();
  }

  stop(): void {
    clearInterval(this.timer);
    this.redis.off('ready', this.onReady);
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

  /** Within holdMs of a noticed loss: a missing token is not final. */
  holding(now = Date.now()): boolean {
    return this.lostAt > 0 && now - this.lostAt < this.holdMs;
  }

  /** Resolves once the hold window has passed. */
  async holdOver(): Promise<void> {
    const left = this.lostAt + this.holdMs - Date.now();
    if (left > 0) await new Promise((r) => setTimeout(r, left));
  }

  /** Reads the store epoch; true when the store lost its data since the last read (the write-back is started). */
  check(): Promise<boolean> {
    this.checking ??= this.readEpoch().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async readEpoch(): Promise<boolean> {
    let id = await bounded(this.redis.get(storeKeys.oauthEpoch), BACKGROUND_DEADLINE_MS);
    if (id !== null && id === this.epoch) return false;
    if (id === null) {
      await bounded(
        this.redis.set(storeKeys.oauthEpoch, randomBytes(16).toString('base64url'), 'NX'),
        BACKGROUND_DEADLINE_MS,
      );
      id = await bounded(this.redis.get(storeKeys.oauthEpoch), BACKGROUND_DEADLINE_MS);
    }
    const first = this.epoch === undefined;
    this.epoch = id ?? undefined;
    // a first read only learns the id; a missing one may be a fresh store or an emptied one: held alike
    if (first && this.size === 0 && id !== null) return false;
    this.lostAt = Date.now();
    void this.writeBack().catch((e: unknown) =>
      this.logger.warn({ err: (e as Error).message }, 'OAuth tokens not written back to the store'),
    );
    return true;
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
