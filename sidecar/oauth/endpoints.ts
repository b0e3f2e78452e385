/**
 * The OAuth endpoints under an OAuth API's listen path (docs/contract.md#oauth-endpoints): POST oauth/token, GET oauth/authorize,
 * POST oauth/revoke. Bodies form-encoded (RFC 6749 §3.2), answers JSON with `Cache-Control: no-store`;
 * errors as RFC 6749 §5.2 (401 invalid_client with WWW-Authenticate, else 400). The rules themselves are
 * stores/oauth/grants.ts; this file is HTTP: parsing, client authentication, the guess limits, metrics.
 * No token, code or secret is logged.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CompiledApi, CompiledOAuth } from '../../contract/config.js';
import type { ClientRecord } from '../../contract/oauth/clients.js';
import { OAuthError, OAuthServer, single, type OAuthErrorCode } from '../../stores/oauth/grants.js';
import type { OAuthGrant } from '../../crds/schemas/api-definition.js';
import type { Logger } from '../../lib/logger.js';
import { GuessLimiter } from './guess-limit.js';

export type OAuthEndpoint = 'token' | 'authorize' | 'revoke';

/** Which endpoint a path relative to the listen path names (one trailing slash allowed), if any. */
export function oauthEndpointOf(relPath: string): OAuthEndpoint | undefined {
  if (relPath.length < 12 || relPath.charCodeAt(1) !== 111 /* o */ || !relPath.startsWith('/oauth/')) return undefined;
  const p = relPath.endsWith('/') ? relPath.slice(7, -1) : relPath.slice(7);
  return p === 'token' || p === 'authorize' || p === 'revoke' ? p : undefined;
}

export interface OAuthMetrics {
  issued(api: string, grant: OAuthGrant): void;
  error(api: string, error: OAuthErrorCode): void;
}

export interface OAuthEndpointDeps {
  server: OAuthServer;
  guesses: GuessLimiter;
  metrics: OAuthMetrics;
  logger: Logger;
}

const MAX_FORM_BYTES = 16 * 1024;
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

function answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    ...NO_STORE,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    req.resume();
    return Promise.reject(new OAuthError('invalid_request', 'the body must be application/x-www-form-urlencoded'));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_FORM_BYTES) {
        reject(new OAuthError('invalid_request', `the body is over ${MAX_FORM_BYTES} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

const decodeForm = (s: string): string => {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
};

/** Client credentials of a request: HTTP Basic (RFC 6749 §2.3.1: each part form-encoded) or the body's. */
function credentials(req: IncomingMessage, form: URLSearchParams): { id: string; secret: string } | undefined {
  const bodyId = single(form, 'client_id');
  const bodySecret = single(form, 'client_secret');
  const h = req.headers.authorization;
  if (h !== undefined && /^basic\s/i.test(h)) {
    const decoded = Buffer.from(h.slice(6).trim(), 'base64').toString('utf8');
    const i = decoded.indexOf(':');
    if (i < 0) throw new OAuthError('invalid_client', 'the Basic credentials have no ":"');
    if (bodySecret !== undefined)
      throw new OAuthError('invalid_request', 'client credentials given twice (Authorization header and body)');
    const id = decodeForm(decoded.slice(0, i));
    if (bodyId !== undefined && bodyId !== id)
      throw new OAuthError('invalid_request', 'client_id of the body differs from the Authorization header');
    return { id, secret: decodeForm(decoded.slice(i + 1)) };
  }
  if (bodyId !== undefined && bodySecret !== undefined) return { id: bodyId, secret: bodySecret };
  return undefined;
}

export function createOAuthEndpoints(d: OAuthEndpointDeps) {
  /**
   * The authenticated client, or an OAuthError (each failure counted against the client from this
   * address, the address and the client: sidecar/oauth/guess-limit.ts).
   */
  async function authenticateClient(
    api: CompiledApi,
    req: IncomingMessage,
    form: URLSearchParams,
    address: string,
  ): Promise<ClientRecord> {
    const creds = credentials(req, form);
    const clientKey = creds ? `${api.namespace}\u0000${api.api_id}\u0000${creds.id}` : undefined;
    const wait = d.guesses.retryAfter(clientKey, address);
    if (wait > 0)
      throw Object.assign(
        new OAuthError('too_many_requests', 'too many failed client authentications; try again later', 429),
        { retryAfter: wait },
      );
    if (!creds) {
      d.guesses.failed(undefined, address);
      throw new OAuthError(
        'invalid_client',
        'client authentication is required (HTTP Basic or client_id and client_secret)',
      );
    }
    const client = await d.server.authenticate(api, creds.id, creds.secret);
    if (!client) {
      d.guesses.failed(clientKey, address);
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    return client;
  }

  async function token(
    api: CompiledApi,
    oauth: CompiledOAuth,
    req: IncomingMessage,
    res: ServerResponse,
    address: string,
  ): Promise<number> {
    const form = await readForm(req);
    const client = await authenticateClient(api, req, form, address);
    const { answer: body, grant } = await d.server.token(api, oauth, client, form);
    d.metrics.issued(api.api_id, grant);
    answer(res, 200, body);
    return 200;
  }

  async function revoke(api: CompiledApi, req: IncomingMessage, res: ServerResponse, address: string): Promise<number> {
    const form = await readForm(req);
    const client = await authenticateClient(api, req, form, address);
    const t = single(form, 'token');
    if (t === undefined) throw new OAuthError('invalid_request', 'token is required');
    await d.server.revoke(client, t);
    answer(res, 200, {});
    return 200;
  }

  async function authorize(
    api: CompiledApi,
    oauth: CompiledOAuth,
    req: IncomingMessage,
    res: ServerResponse,
    query: string,
  ): Promise<number> {
    const params = new URLSearchParams(query);
    await d.server.checkAuthorization(api, oauth, params);
    if (oauth.loginRedirect === undefined)
      throw new OAuthError(
        'unauthorized_client',
        'the API has no auth_login_redirect (oauth_meta) to send the user to',
      );
    const to = oauth.loginRedirect + (query ? (oauth.loginRedirect.includes('?') ? '&' : '?') + query : '');
    res.writeHead(307, { location: to, ...NO_STORE, 'content-length': 0 });
    res.end();
    return 307;
  }

  /**
   * Serves one endpoint; resolves with the status answered (never rejects). `address`: the caller's
   * source address as the guess limits count it (the gateway's `ClientAddresses.of`).
   */
  async function serve(
    which: OAuthEndpoint,
    api: CompiledApi,
    oauth: CompiledOAuth,
    req: IncomingMessage,
    res: ServerResponse,
    query: string,
    address: string,
  ): Promise<number> {
    const method = req.method ?? 'GET';
    const allowed = which === 'authorize' ? ['GET', 'HEAD'] : ['POST'];
    try {
      if (!allowed.includes(method)) {
        req.resume();
        answer(
          res,
          405,
          { error: 'invalid_request', error_description: `use ${allowed[0]}` },
          { allow: allowed.join(', ') },
        );
        d.metrics.error(api.api_id, 'invalid_request');
        return 405;
      }
      if (which === 'token') return await token(api, oauth, req, res, address);
      if (which === 'revoke') return await revoke(api, req, res, address);
      return await authorize(api, oauth, req, res, query);
    } catch (e) {
      if (res.headersSent) {
        res.destroy();
        return 500;
      }
      if (e instanceof OAuthError) {
        d.metrics.error(api.api_id, e.error);
        const headers: Record<string, string> = {};
        if (e.status === 401) headers['www-authenticate'] = 'Basic realm="oauth"';
        const retry = (e as { retryAfter?: number }).retryAfter;
        if (retry !== undefined) headers['retry-after'] = String(retry);
        answer(res, e.status, e.body(), headers);
        return e.status;
      }
      d.logger.error({ api: api.api_id, endpoint: which, err: (e as Error).message }, 'OAuth endpoint failed');
      d.metrics.error(api.api_id, 'server_error');
      const unavailable = (e as Error).name === 'StoreUnavailableError' || (e as Error).name === 'StoreDeadlineError';
      answer(
        res,
        unavailable ? 503 : 500,
        { error: 'server_error', error_description: unavailable ? 'the token store is unavailable' : 'internal error' },
        unavailable ? { 'retry-after': '1' } : {},
      );
      return unavailable ? 503 : 500;
    }
  }

  return { serve };
}

export type OAuthEndpoints = ReturnType<typeof createOAuthEndpoints>;
