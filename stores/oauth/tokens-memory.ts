/** OAuth tokens and codes in memory (standalone), behind the contract's TokenStore (contract/oauth/tokens.ts). */
import type { CodeRecord, TokenChange, TokenRecord, TokenState, TokenStore } from '../../contract/oauth/tokens.js';

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
