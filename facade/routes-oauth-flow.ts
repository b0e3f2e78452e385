/**
 * The facade's part of OAuth at the gateway (docs/contract.md#oauth), X-Gw-Authorization:
 *   POST /gw/oauth/authorize-client: the API owner's login page, once the user consented, gets a code for
 *     the client (the same checks as the gateway's oauth/authorize) → {code, redirect_to}.
 *   POST /gw/oauth/introspect (RFC 7662): JSON or form `token` → {active: false} or what the token is.
 * Codes and tokens go to the store the gateways read (standalone: in process; cluster: Redis, so
 * `gw facade` needs --redis for these two routes: 503 without).
 */
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import type { CompiledApi, CompiledConfig } from '../contract/config.js';
import { OAuthError } from '../stores/oauth/grants.js';
import { requireGwSecret } from './auth.js';
import type { FacadeOAuth, Route, RouteArgs } from './context.js';
import { HttpError, readJson, sendJson, validate } from '../lib/http/http-util.js';

export const AuthorizeClientBody = z.strictObject({
  api_id: z.string().min(1),
  client_id: z.string().min(1),
  redirect_uri: z.string().min(1),
  response_type: z.literal('code'),
  state: z.string().max(2048).optional(),
  code_challenge: z.string().optional(),
  code_challenge_method: z.string().optional(),
  scope: z.string().optional(),
});

export const IntrospectBody = z.looseObject({ token: z.string().min(1), token_type_hint: z.string().optional() });

function oauthOf(args: RouteArgs): FacadeOAuth {
  requireGwSecret(args.req, args.ctx.options.secret);
  const o = args.ctx.oauth;
  if (!o) throw new HttpError(503, 'OAuth needs the shared store: start gw facade with --redis');
  return o;
}

function findApi(config: CompiledConfig, namespace: string | undefined, apiId: string): CompiledApi | undefined {
  return config.apis.find((a) => a.api_id === apiId && (namespace === undefined || a.namespace === namespace));
}

function oauthFailure(e: unknown): never {
  if (e instanceof OAuthError) throw new HttpError(e.status === 401 ? 400 : e.status, `${e.error}: ${e.description}`);
  throw e;
}

async function authorizeClient(args: RouteArgs): Promise<void> {
  const o = oauthOf(args);
  const body = validate(AuthorizeClientBody, await readJson(args.req));
  const api = findApi(o.config(), args.ctx.apiNamespace, body.api_id);
  if (!api) throw new HttpError(404, 'API not found');
  if (!api.oauth) throw new HttpError(400, `api_id: API ${body.api_id} does not use OAuth (use_oauth2)`);
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(body)) if (v !== undefined && k !== 'api_id') params.set(k, v);
  try {
    const { client, redirectUri, challenge } = await o.server.checkAuthorization(api, api.oauth, params);
    const code = await o.server.issueCode(client, redirectUri, challenge);
    const to = new URL(redirectUri);
    to.searchParams.set('code', code);
    if (body.state !== undefined) to.searchParams.set('state', body.state);
    args.ctx.logger.info({ api_id: api.api_id, client_id: client.client_id }, 'OAuth authorization code issued');
    sendJson(args.res, 200, { code, redirect_to: to.toString() }, { 'cache-control': 'no-store' });
  } catch (e) {
    oauthFailure(e);
  }
}

async function readFormOrJson(req: IncomingMessage): Promise<unknown> {
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') return readJson(req);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 64 * 1024) throw new HttpError(413, 'request body larger than 65536 bytes', { connection: 'close' });
    chunks.push(c);
  }
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

async function introspect(args: RouteArgs): Promise<void> {
  const o = oauthOf(args);
  const body = validate(IntrospectBody, await readFormOrJson(args.req));
  sendJson(args.res, 200, await o.server.introspect(body.token), { 'cache-control': 'no-store' });
}

export const oauthFlowRoutes: Route[] = [
  { template: '/gw/oauth/authorize-client', methods: { POST: authorizeClient } },
  { template: '/gw/oauth/introspect', methods: { POST: introspect } },
];
