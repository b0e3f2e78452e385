/**
 * The authorization server's rules (RFC 6749, 7636, 7009, 7662; docs/contract.md#oauth), without HTTP: the gateway's
 * oauth/* endpoints (sidecar/oauth/endpoints.ts) and the facade's authorize-client and introspect
 * call these. Tokens, refresh tokens and codes are 256 random bits (base64url), stored by SHA-256 only.
 *   client_credentials: an access token (no refresh token, RFC 6749 §4.4.3).
 *   authorization_code: the code is single use and lives 60 s; redirect_uri must be the client's; with a
 *     PKCE challenge (S256 only) the verifier must hash to it. A code redeemed twice revokes every token
 *     issued from it (§4.1.2). The grant starts a family; with refresh_token allowed, a refresh token too.
 *   refresh_token: rotated (a new refresh token each time, the used one dead); a used one presented again
 *     revokes its whole family (every token descended from the grant).
 */
import { sha256hex } from '../../lib/hash.js';
import type { CompiledApi, CompiledOAuth } from '../../contract/config.js';
import type { OAuthGrant } from '../../crds/schemas/api-definition.js';
import {
  lookupClient,
  verifyClientSecret,
  type ClientDirectory,
  type ClientRecord,
} from '../../contract/oauth/clients.js';
import { CODE_TTL_SECONDS, type TokenRecord, type TokenStore } from '../../contract/oauth/tokens.js';
const { createHash, randomBytes } = process.getBuiltinModule('node:crypto');

/** An RFC 6749 §5.2 error (or §4.1.2.1 for the authorize endpoint): `status` 401 for invalid_client, else 400. */
export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = error === 'invalid_client' ? 401 : 400,
  ) {
    super(description);
  }
  body(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

/** Every error code the endpoints answer with (also the bounded label values of gw_oauth_token_errors_total). */
export const OAUTH_ERRORS = [
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'unsupported_response_type',
  'too_many_requests',
  'invalid_token',
  'server_error',
] as const;
export type OAuthErrorCode = (typeof OAUTH_ERRORS)[number];

export interface TokenAnswer {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  refresh_token?: string;
}

const GRANTS: readonly string[] = ['client_credentials', 'authorization_code', 'refresh_token'];
const PKCE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export const newOpaque = (): string => randomBytes(32).toString('base64url');
export const hashOpaque = (raw: string): string => sha256hex(raw);
const pkceS256 = (verifier: string): string => createHash('sha256').update(verifier, 'ascii').digest('base64url');

/** The same value once in `params`, or undefined; a parameter given twice is an invalid_request (RFC 6749 §3.1). */
export function single(params: URLSearchParams, name: string): string | undefined {
  const all = params.getAll(name);
  if (all.length > 1) throw new OAuthError('invalid_request', `${name} given more than once`);
  return all[0] === '' ? undefined : all[0];
}

function required(params: URLSearchParams, name: string): string {
  const v = single(params, name);
  if (v === undefined) throw new OAuthError('invalid_request', `${name} is required`);
  return v;
}

export class OAuthServer {
  constructor(
    readonly tokens: TokenStore,
    readonly clients: ClientDirectory,
    private readonly nowSeconds: () => number = () => Math.floor(Date.now() / 1000),
  ) {}

  /** The client when the secret is its own (constant time; an unknown client costs what a wrong secret does). */
  async authenticate(api: CompiledApi, clientId: string, secret: string): Promise<ClientRecord | undefined> {
    const c = await lookupClient(this.clients, api.namespace, api.api_id, clientId);
    return verifyClientSecret(c, secret) ? c : undefined;
  }

  /** POST oauth/token after client authentication. */
  async token(
    api: CompiledApi,
    oauth: CompiledOAuth,
    client: ClientRecord,
    params: URLSearchParams,
  ): Promise<{ answer: TokenAnswer; grant: OAuthGrant }> {
    const grant = required(params, 'grant_type');
    if (!GRANTS.includes(grant))
      throw new OAuthError('unsupported_grant_type', `grant_type ${JSON.stringify(grant)} is not supported`);
    const g = grant as OAuthGrant;
    if (!oauth.grants.includes(g))
      throw new OAuthError(
        'unauthorized_client',
        `grant_type ${grant} is not allowed on this API (oauth_meta.allowed_access_types)`,
      );
    switch (g) {
      case 'client_credentials':
        return { answer: await this.issue(oauth, client, undefined, false), grant: g };
      case 'authorization_code':
        return { answer: await this.redeemCode(oauth, client, params), grant: g };
      case 'refresh_token':
        return { answer: await this.refresh(oauth, client, params), grant: g };
    }
  }

  private async redeemCode(oauth: CompiledOAuth, client: ClientRecord, params: URLSearchParams): Promise<TokenAnswer> {
    const code = required(params, 'code');
    const redirectUri = required(params, 'redirect_uri');
    const verifier = single(params, 'code_verifier');
    const hash = hashOpaque(code);
    const rec = await this.tokens.takeCode(hash);
    if (!rec) {
      // a code redeemed before: everything issued from it is revoked (RFC 6749 §4.1.2)
      const fam = await this.tokens.codeFamily(hash);
      if (fam !== undefined) {
        await this.tokens.revokeFamily(fam);
        throw new OAuthError(
          'invalid_grant',
          'the authorization code was already used; the tokens issued from it are revoked',
        );
      }
      throw new OAuthError('invalid_grant', 'the authorization code is unknown or expired');
    }
    if (
      rec.ns !== client.namespace ||
      rec.api_id !== client.api_id ||
      rec.client_id !== client.client_id ||
      rec.cuid !== (client.uid ?? '')
    )
      throw new OAuthError('invalid_grant', 'the authorization code was issued to another client');
    if (redirectUri !== rec.redirect_uri || redirectUri !== client.redirect_uri)
      throw new OAuthError('invalid_grant', 'redirect_uri does not match the authorization');
    if (rec.challenge !== undefined) {
      if (verifier === undefined) throw new OAuthError('invalid_grant', 'code_verifier is required (PKCE)');
      if (!PKCE_VERIFIER.test(verifier) || pkceS256(verifier) !== rec.challenge)
        throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge (PKCE)');
    }
    const fam = newOpaque();
    const answer = await this.issue(oauth, client, fam, oauth.grants.includes('refresh_token'));
    await this.tokens.markCodeUsed(hash, fam, this.nowSeconds() + Math.max(oauth.accessTtl, oauth.refreshTtl));
    return answer;
  }

  private async refresh(oauth: CompiledOAuth, client: ClientRecord, params: URLSearchParams): Promise<TokenAnswer> {
    const hash = hashOpaque(required(params, 'refresh_token'));
    const rec = await this.tokens.get(hash);
    if (!rec) {
      // a used (rotated) refresh token presented again: stolen, or a confused client; its grant's tokens go
      const fam = await this.tokens.refreshFamily(hash);
      if (fam !== undefined) {
        await this.tokens.revokeFamily(fam);
        throw new OAuthError(
          'invalid_grant',
          'the refresh token was already used; the tokens issued from it are revoked',
        );
      }
      throw new OAuthError('invalid_grant', 'the refresh token is unknown, expired or revoked');
    }
    if (rec.kind !== 'refresh' || rec.exp <= this.nowSeconds())
      throw new OAuthError('invalid_grant', 'the refresh token is unknown, expired or revoked');
    if (!this.issuedTo(rec, client))
      throw new OAuthError('invalid_grant', 'the refresh token was issued to another client');
    const fam = rec.fam ?? newOpaque();
    if (!(await this.tokens.useRefresh(hash, fam, rec.exp))) {
      await this.tokens.revokeFamily(fam); // two uses at once: the same replay, caught by the atomic mark
      throw new OAuthError(
        'invalid_grant',
        'the refresh token was already used; the tokens issued from it are revoked',
      );
    }
    await this.tokens.revoke(hash); // rotated: the used refresh token is dead (its use mark stays, for replays)
    return this.issue(oauth, client, fam, true);
  }

  private issuedTo(rec: TokenRecord, client: ClientRecord): boolean {
    return (
      rec.ns === client.namespace &&
      rec.api_id === client.api_id &&
      rec.client_id === client.client_id &&
      rec.cuid === (client.uid ?? '')
    );
  }

  private async issue(
    oauth: CompiledOAuth,
    client: ClientRecord,
    fam: string | undefined,
    withRefresh: boolean,
  ): Promise<TokenAnswer> {
    const iat = this.nowSeconds();
    const base = {
      ns: client.namespace,
      api_id: client.api_id,
      client_id: client.client_id,
      cuid: client.uid ?? '',
      iat,
    };
    const access = newOpaque();
    await this.tokens.put(
      hashOpaque(access),
      { ...base, kind: 'access', exp: iat + oauth.accessTtl, ...(fam !== undefined ? { fam } : {}) },
      oauth.maxTokensPerClient,
    );
    const answer: TokenAnswer = { access_token: access, token_type: 'bearer', expires_in: oauth.accessTtl };
    if (withRefresh && fam !== undefined) {
      const refresh = newOpaque();
      await this.tokens.put(
        hashOpaque(refresh),
        { ...base, kind: 'refresh', exp: iat + oauth.refreshTtl, fam },
        oauth.maxTokensPerClient,
      );
      answer.refresh_token = refresh;
    }
    return answer;
  }

  /**
   * GET oauth/authorize, and the facade's authorize-client: the client of this API, the redirect URI its
   * own (exactly), the response type `code`, a PKCE challenge S256 when given. The client, or an OAuthError
   * (answered 400 JSON: never a redirect to a URI that was not checked).
   */
  async checkAuthorization(
    api: CompiledApi,
    oauth: CompiledOAuth,
    params: URLSearchParams,
  ): Promise<{ client: ClientRecord; redirectUri: string; challenge?: string }> {
    const clientId = required(params, 'client_id');
    const client = await lookupClient(this.clients, api.namespace, api.api_id, clientId);
    if (!client) throw new OAuthError('invalid_request', 'client_id: no such client of this API', 400);
    if (!client.redirect_uri) throw new OAuthError('invalid_request', 'the client has no redirect_uri registered', 400);
    const redirectUri = single(params, 'redirect_uri') ?? client.redirect_uri;
    if (redirectUri !== client.redirect_uri)
      throw new OAuthError('invalid_request', "redirect_uri does not match the client's registered redirect URI", 400);
    const responseType = required(params, 'response_type');
    if (responseType !== 'code') throw new OAuthError('unsupported_response_type', 'response_type must be code');
    if (!oauth.grants.includes('authorization_code'))
      throw new OAuthError(
        'unauthorized_client',
        'authorization_code is not allowed on this API (oauth_meta.allowed_access_types)',
      );
    const challenge = single(params, 'code_challenge');
    const method = single(params, 'code_challenge_method');
    if (challenge === undefined) {
      if (method !== undefined) throw new OAuthError('invalid_request', 'code_challenge_method without code_challenge');
      return { client, redirectUri };
    }
    if ((method ?? 'plain') !== 'S256')
      throw new OAuthError('invalid_request', 'code_challenge_method must be S256 (plain is not supported)');
    if (!PKCE_CHALLENGE.test(challenge))
      throw new OAuthError('invalid_request', 'code_challenge must be 43 base64url characters (S256)');
    return { client, redirectUri, challenge };
  }

  /** A code for a checked authorization (the facade's authorize-client, after the user consented). */
  async issueCode(client: ClientRecord, redirectUri: string, challenge: string | undefined): Promise<string> {
    const code = newOpaque();
    await this.tokens.putCode(hashOpaque(code), {
      ns: client.namespace,
      api_id: client.api_id,
      client_id: client.client_id,
      cuid: client.uid ?? '',
      redirect_uri: redirectUri,
      ...(challenge !== undefined ? { challenge } : {}),
      exp: this.nowSeconds() + CODE_TTL_SECONDS,
    });
    return code;
  }

  /**
   * RFC 7009: a token of this client is revoked (a refresh token with its family: the access tokens of the
   * same grant go too); an unknown token, or another client's, is answered the same (200) and left alone.
   */
  async revoke(client: ClientRecord, token: string): Promise<void> {
    const hash = hashOpaque(token);
    const rec = await this.tokens.get(hash);
    if (!rec || !this.issuedTo(rec, client)) return;
    if (rec.kind === 'refresh' && rec.fam !== undefined) await this.tokens.revokeFamily(rec.fam);
    await this.tokens.revoke(hash);
  }

  /** RFC 7662: active while the token exists, has not expired and its client still exists (same uid). */
  async introspect(token: string): Promise<Record<string, unknown>> {
    const rec = await this.tokens.get(hashOpaque(token));
    if (!rec || rec.exp <= this.nowSeconds()) return { active: false };
    const c = await lookupClient(this.clients, rec.ns, rec.api_id, rec.client_id);
    if (!c || (c.uid ?? '') !== rec.cuid) return { active: false };
    return {
      active: true,
      client_id: rec.client_id,
      api_id: rec.api_id,
      token_type: rec.kind === 'access' ? 'bearer' : 'refresh_token',
      exp: rec.exp,
      iat: rec.iat,
    };
  }
}
