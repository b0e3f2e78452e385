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
