/**
 * OAuth tokens and authorization codes (docs/contract.md#oauth-tokens), stored by the SHA-256 hex of the token or code:
 * the raw value is known only to the client it was given to.
 *   token: an access or refresh token, with the client it was issued to (namespace, api_id, client_id,
 *     the client's uid) and its lifetime (iat, exp: unix seconds). `fam` (family) names the authorization
 *     grant a token descends from (one authorization code and every refresh after it): presenting a used
 *     refresh token, or a code a second time, revokes the whole family.
 *   code: single use, 60 s, with the redirect URI and the PKCE challenge of its authorization.
 * Implementations: memory (standalone, persisted by standalone/oauth-state.ts) and Redis (cluster,
 * tokens-redis.ts: TTLs, so nothing outlives its expiry and no sweeper is needed).
 */
import { z } from 'zod';

export const TokenRecordSchema = z.object({
  kind: z.enum(['access', 'refresh']),
  ns: z.string(),
  api_id: z.string(),
  client_id: z.string(),
  cuid: z.string(),
  iat: z.number(),
  exp: z.number(),
  fam: z.string().optional(),
});
export type TokenRecord = z.infer<typeof TokenRecordSchema>;

export const CodeRecordSchema = z.object({
  ns: z.string(),
  api_id: z.string(),
  client_id: z.string(),
  cuid: z.string(),
  redirect_uri: z.string(),
  /** PKCE S256 code_challenge (base64url), when the authorization carried one. */
  challenge: z.string().optional(),
  exp: z.number(),
});
export type CodeRecord = z.infer<typeof CodeRecordSchema>;

/** How long a code lives (docs/contract.md#oauth). */
export const CODE_TTL_SECONDS = 60;

export interface TokenStore {
  /** The token, or null for none; undefined: only `get` can tell (lets the request path stay synchronous). */
  peek(hash: string): TokenRecord | null | undefined;
  get(hash: string): Promise<TokenRecord | undefined>;
  /**
   * Stores a token until its exp (and enters it in its family). With `maxPerClient`, the client's live
   * tokens of the record's kind are bounded: past it the oldest are revoked (docs/oauth.md, "Tokens per client").
   */
  put(hash: string, rec: TokenRecord, maxPerClient?: number): Promise<void>;
  /** Removes a token; its record when there was one. */
  revoke(hash: string): Promise<TokenRecord | undefined>;
  /** Removes every token of a family; how many. */
  revokeFamily(fam: string): Promise<number>;
  /** Removes every token of a client (where the store can enumerate them; Redis relies on the client's uid). */
  revokeClient(ns: string, apiId: string, clientId: string): Promise<number>;
  /**
   * Marks a refresh token used, atomically, remembering its family: true for its first use, false when it
   * had been used before (a replay: the caller revokes the family). The mark lives until `exp`.
   */
  useRefresh(hash: string, fam: string, exp: number): Promise<boolean>;
  /** The family of a refresh token that was used (and rotated away), when it was. */
  refreshFamily(hash: string): Promise<string | undefined>;
  putCode(hash: string, rec: CodeRecord): Promise<void>;
  /** The code, removed in the same step (single use); undefined when unknown, used or expired. */
  takeCode(hash: string): Promise<CodeRecord | undefined>;
  /** Remembers that a code was redeemed into `fam` until `exp` (a second redemption revokes the family). */
  markCodeUsed(hash: string, fam: string, exp: number): Promise<void>;
  /** The family a redeemed code gave, when it was redeemed. */
  codeFamily(hash: string): Promise<string | undefined>;
  /** Called with the hash of a token that was removed (cache invalidation). */
  onRevoke(listener: (hash: string) => void): void;
  close(): Promise<void>;
}

/** The persisted form of a MemoryTokenStore (standalone's DIR/.gw/.oauth-tokens.json). */
export const TokenStateSchema = z.strictObject({
  version: z.literal(1),
  tokens: z.record(z.string(), TokenRecordSchema),
  codes: z.record(z.string(), CodeRecordSchema),
  usedRefresh: z.record(z.string(), z.object({ fam: z.string(), exp: z.number() })),
  usedCodes: z.record(z.string(), z.object({ fam: z.string(), exp: z.number() })),
  /** The journal of the changes made after this state was written (standalone/oauth-state.ts). */
  journal: z.string().optional(),
});
export type TokenState = z.infer<typeof TokenStateSchema>;

const Used = { fam: z.string(), exp: z.number() };
/** One change of a MemoryTokenStore, as standalone's journal holds it (one JSON line each). */
export const TokenChangeSchema = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('tok'), h: z.string(), r: TokenRecordSchema }),
  z.strictObject({ op: z.literal('untok'), h: z.string() }),
  z.strictObject({ op: z.literal('code'), h: z.string(), r: CodeRecordSchema }),
  z.strictObject({ op: z.literal('uncode'), h: z.string() }),
  z.strictObject({ op: z.literal('rt'), h: z.string(), ...Used }),
  z.strictObject({ op: z.literal('cu'), h: z.string(), ...Used }),
]);
export type TokenChange = z.infer<typeof TokenChangeSchema>;

/** The bound's key of a token: its kind and its client. */
const clientKindKey = (t: TokenRecord): string => `${t.kind}\u0000${t.ns}\u0000${t.api_id}\u0000${t.client_id}`;

/**
 * Standalone's store: maps in memory, expired entries dropped when read and by `sweep`. `persist` is
 * awaited with the changes of every operation (standalone appends them to its journal before the token is
 * handed out, so a restart loses no token). Each client's tokens of each kind are indexed in issuance order,
 * so the bound of `put` revokes the oldest without walking the other clients' tokens.
 */
export class MemoryTokenStore implements TokenStore {
  private tokens = new Map<string, TokenRecord>();
  private codes = new Map<string, CodeRecord>();
  private usedRefresh = new Map<string, { fam: string; exp: number }>();
  private usedCodes = new Map<string, { fam: string; exp: number }>();
  /** kind + client → its token hashes with their exp, in issuance order. */
  private byClient = new Map<string, Map<string, number>>();
  private readonly listeners: ((hash: string) => void)[] = [];

  constructor(
    private readonly nowSeconds: () => number = () => Date.now() / 1000,
    private readonly persist: (changes: readonly TokenChange[]) => Promise<void> = async () => {},
  ) {}

  peek(hash: string): TokenRecord | null {
    const t = this.tokens.get(hash);
    if (t === undefined) return null;
    if (t.exp <= this.nowSeconds()) {
      this.forget(hash, t);
      return null;
    }
    return t;
  }
  async get(hash: string): Promise<TokenRecord | undefined> {
    return this.peek(hash) ?? undefined;
  }
  async put(hash: string, rec: TokenRecord, maxPerClient?: number): Promise<void> {
    this.set(hash, rec);
    const changes: TokenChange[] = [{ op: 'tok', h: hash, r: rec }];
    const mine = this.byClient.get(clientKindKey(rec))!;
    if (maxPerClient !== undefined && mine.size > maxPerClient) {
      const now = this.nowSeconds();
      // oldest first (issuance order); an expired one goes without counting, and without a journal line
      for (const [h, exp] of mine) {
        if (mine.size <= maxPerClient) break;
        if (h === hash) continue;
        if (exp > now) changes.push({ op: 'untok', h });
        this.drop(h);
      }
    }
    await this.persist(changes);
  }
  async revoke(hash: string): Promise<TokenRecord | undefined> {
    const t = this.tokens.get(hash);
    if (t === undefined) return undefined;
    this.drop(hash);
    await this.persist([{ op: 'untok', h: hash }]);
    return t;
  }
  async revokeFamily(fam: string): Promise<number> {
    return this.revokeWhere((t) => t.fam === fam);
  }
  async revokeClient(ns: string, apiId: string, clientId: string): Promise<number> {
    const changes: TokenChange[] = [];
    for (const [h, c] of this.codes)
      if (c.ns === ns && c.api_id === apiId && c.client_id === clientId) {
        this.codes.delete(h);
        changes.push({ op: 'uncode', h });
      }
    return this.revokeWhere((t) => t.ns === ns && t.api_id === apiId && t.client_id === clientId, changes);
  }
  async useRefresh(hash: string, fam: string, exp: number): Promise<boolean> {
    if (this.usedRefresh.has(hash)) return false;
    this.usedRefresh.set(hash, { fam, exp });
    await this.persist([{ op: 'rt', h: hash, fam, exp }]);
    return true;
  }
  async refreshFamily(hash: string): Promise<string | undefined> {
    const u = this.usedRefresh.get(hash);
    return u !== undefined && u.exp > this.nowSeconds() ? u.fam : undefined;
  }
  async putCode(hash: string, rec: CodeRecord): Promise<void> {
    this.codes.set(hash, rec);
    await this.persist([{ op: 'code', h: hash, r: rec }]);
  }
  async takeCode(hash: string): Promise<CodeRecord | undefined> {
    const c = this.codes.get(hash);
    if (c === undefined) return undefined;
    this.codes.delete(hash);
    await this.persist([{ op: 'uncode', h: hash }]);
    return c.exp > this.nowSeconds() ? c : undefined;
  }
  async markCodeUsed(hash: string, fam: string, exp: number): Promise<void> {
    this.usedCodes.set(hash, { fam, exp });
    await this.persist([{ op: 'cu', h: hash, fam, exp }]);
  }
  async codeFamily(hash: string): Promise<string | undefined> {
    const u = this.usedCodes.get(hash);
    return u !== undefined && u.exp > this.nowSeconds() ? u.fam : undefined;
  }
  onRevoke(listener: (hash: string) => void): void {
    this.listeners.push(listener);
  }
  async close(): Promise<void> {}

  /** Drops what has expired; true when anything was dropped. */
  sweep(): boolean {
    const now = this.nowSeconds();
    const before = this.size();
    for (const [h, t] of this.tokens) if (t.exp <= now) this.forget(h, t);
    for (const [h, c] of this.codes) if (c.exp <= now) this.codes.delete(h);
    for (const [h, u] of this.usedRefresh) if (u.exp <= now) this.usedRefresh.delete(h);
    for (const [h, u] of this.usedCodes) if (u.exp <= now) this.usedCodes.delete(h);
    return this.size() !== before;
  }

  snapshot(): TokenState {
    return {
      version: 1,
      tokens: Object.fromEntries(this.tokens),
      codes: Object.fromEntries(this.codes),
      usedRefresh: Object.fromEntries(this.usedRefresh),
      usedCodes: Object.fromEntries(this.usedCodes),
    };
  }

  restore(s: TokenState): void {
    this.tokens = new Map();
    this.byClient = new Map();
    for (const [h, t] of Object.entries(s.tokens)) this.set(h, t);
    this.codes = new Map(Object.entries(s.codes));
    this.usedRefresh = new Map(Object.entries(s.usedRefresh));
    this.usedCodes = new Map(Object.entries(s.usedCodes));
    this.sweep();
  }

  /** Applies a change read back from the journal (no persist, no listener: nothing is serving yet). */
  apply(c: TokenChange): void {
    switch (c.op) {
      case 'tok':
        this.set(c.h, c.r);
        break;
      case 'untok': {
        const t = this.tokens.get(c.h);
        if (t) this.forget(c.h, t);
        break;
      }
      case 'code':
        this.codes.set(c.h, c.r);
        break;
      case 'uncode':
        this.codes.delete(c.h);
        break;
      case 'rt':
        this.usedRefresh.set(c.h, { fam: c.fam, exp: c.exp });
        break;
      case 'cu':
        this.usedCodes.set(c.h, { fam: c.fam, exp: c.exp });
        break;
    }
  }

  /** Entries held (tokens, codes and use marks): what a compaction of the journal writes. */
  size(): number {
    return this.tokens.size + this.codes.size + this.usedRefresh.size + this.usedCodes.size;
  }

  /** Live (stored) tokens of a client of one kind (tests, and the bound). */
  clientTokens(kind: TokenRecord['kind'], ns: string, apiId: string, clientId: string): number {
    return this.byClient.get(`${kind}\u0000${ns}\u0000${apiId}\u0000${clientId}`)?.size ?? 0;
  }

  private set(hash: string, rec: TokenRecord): void {
    const prior = this.tokens.get(hash);
    if (prior) this.forget(hash, prior);
    this.tokens.set(hash, rec);
    const k = clientKindKey(rec);
    let mine = this.byClient.get(k);
    if (!mine) this.byClient.set(k, (mine = new Map()));
    mine.set(hash, rec.exp);
  }

  /** Removes a token from the maps (no listener). */
  private forget(hash: string, t: TokenRecord): void {
    this.tokens.delete(hash);
    const k = clientKindKey(t);
    const mine = this.byClient.get(k);
    if (mine) {
      mine.delete(hash);
      if (mine.size === 0) this.byClient.delete(k);
    }
  }

  private drop(hash: string): void {
    const t = this.tokens.get(hash);
    if (t === undefined) return;
    this.forget(hash, t);
    for (const l of this.listeners) l(hash);
  }

  private async revokeWhere(match: (t: TokenRecord) => boolean, changes: TokenChange[] = []): Promise<number> {
    let n = 0;
    for (const [h, t] of this.tokens)
      if (match(t)) {
        this.drop(h);
        changes.push({ op: 'untok', h });
        n++;
      }
    await this.persist(changes);
    return n;
  }
}
