/** /api/apis/oauth/{apiId}[/{clientId}]: OAuth clients of an API (bearer access token). */
import { z } from 'zod';
import { FreeObject } from '../crds/schemas/common.js';
import { ClientId, RedirectUri, type OAuthClientSpecT } from '../crds/schemas/oauth-client.js';
import { clientResourceName, clientSecretName, type ApiRef, type ClientRecord } from './backend.js';
import { requireBearer } from './auth.js';
import type { Route, RouteArgs } from './context.js';
import { HttpError, readJson, sendJson, validate } from '../lib/http/http-util.js';
const { randomBytes } = process.getBuiltinModule('node:crypto');

/**
 * The request body: the OAuth client object of docs/contract.md#key-body; unknown fields are refused. api_model is accepted and ignored.
 * An empty client_id or secret counts as not supplied (generated), as a templated CI body sends them.
 */
export const OAuthClientBody = z.strictObject({
  api_id: z.string().optional(),
  api_model: FreeObject.optional(),
  client_id: z.union([z.literal(''), ClientId]).optional(),
  client_name: z.string().max(1024).optional(),
  description: z.string().max(4096).optional(),
  meta_data: FreeObject.nullable().optional(),
  policy_id: z.string().optional(),
  // the resource's own rule (absolute https, or http on a loopback host), so what is accepted here loads
  redirect_uri: z.union([z.literal(''), RedirectUri]).optional(),
  secret: z.string().max(1024).optional(),
});

/** The OAuth client object of docs/contract.md#key-body; `secret` only on create and on reading one client. */
function clientView(c: ClientRecord, withSecret: boolean): Record<string, unknown> {
  const s = c.spec;
  const view: Record<string, unknown> = {
    client_id: s.client_id,
    client_name: s.client_name ?? '',
    description: s.description ?? '',
    policy_id: s.policy_id ?? '',
    redirect_uri: s.redirect_uri ?? '',
    meta_data: s.meta_data ?? {},
    dcr_registration: {
      access_token: s.dcr_registration?.access_token ?? '',
      client_uri: s.dcr_registration?.client_uri ?? '',
      provider: s.dcr_registration?.provider ?? '',
    },
  };
  if (withSecret) view.secret = c.secret ?? '';
  return view;
}

async function findApi(args: RouteArgs): Promise<ApiRef> {
  requireBearer(args.req, args.ctx.options.access_tokens ?? []);
  const api = await args.ctx.backend.getApi(args.ctx.apiNamespace, args.params.apiId!);
  if (!api) throw new HttpError(404, 'API not found');
  return api;
}

async function createClient(args: RouteArgs): Promise<void> {
  const { ctx, res } = args;
  const api = await findApi(args);
  const body = validate(OAuthClientBody, await readJson(args.req));
  if (body.api_id && body.api_id !== api.apiId) throw new HttpError(400, 'api_id: must match the apiId of the path');
  const policyId = body.policy_id || undefined;
  if (policyId && !(await ctx.backend.getPolicy(api.namespace, policyId))) {
    throw new HttpError(400, `policy_id: policy ${JSON.stringify(policyId)} not found in namespace ${api.namespace}`);
  }
  const clientId = body.client_id || randomBytes(16).toString('hex');
  const secret = body.secret || randomBytes(32).toString('base64url');
  const name = clientResourceName(api.namespace, api.apiId, clientId);
  const spec: OAuthClientSpecT = {
    api_id: api.apiId,
    client_id: clientId,
    ...(body.client_name !== undefined ? { client_name: body.client_name } : {}),
    ...(body.description !== undefined ? { description: body.description } : {}),
    ...(policyId !== undefined ? { policy_id: policyId } : {}),
    ...(body.redirect_uri !== undefined ? { redirect_uri: body.redirect_uri } : {}),
    ...(body.meta_data ? { meta_data: body.meta_data } : {}),
    secretRef: { name: clientSecretName(name), key: 'secret' },
  };
  const record: ClientRecord & { secret: string } = { namespace: api.namespace, name, spec, secret };
  await ctx.locks.run(`client:${api.apiId}\u0000${clientId}`, async () => {
    if (await ctx.backend.getClient(api.apiId, clientId))
      throw new HttpError(409, 'client_id: a client with this id already exists for this API');
    await ctx.backend.putClient(record);
  });
  ctx.logger.info({ apiId: api.apiId, clientId, resource: `${api.namespace}/${name}` }, 'OAuth client created');
  sendJson(res, 200, clientView(record, true));
}

async function listClients(args: RouteArgs): Promise<void> {
  const api = await findApi(args);
  const clients = await args.ctx.backend.listClients(api.apiId);
  sendJson(
    args.res,
    200,
    clients.map((c) => clientView(c, false)),
  );
}

async function getClient(args: RouteArgs): Promise<void> {
  const api = await findApi(args);
  const c = await args.ctx.backend.getClient(api.apiId, args.params.clientId!);
  if (!c) throw new HttpError(404, 'OAuth client not found');
  sendJson(args.res, 200, clientView(c, true));
}

async function deleteClient(args: RouteArgs): Promise<void> {
  const api = await findApi(args);
  const clientId = args.params.clientId!;
  const deleted = await args.ctx.locks.run(`client:${api.apiId}\u0000${clientId}`, () =>
    args.ctx.backend.deleteClient(api.apiId, clientId),
  );
  if (!deleted) throw new HttpError(404, 'OAuth client not found');
  args.ctx.logger.info({ apiId: api.apiId, clientId }, 'OAuth client deleted');
  sendJson(args.res, 200, { key: clientId, action: 'deleted', status: 'ok' });
}

export const oauthRoutes: Route[] = [
  { template: '/api/apis/oauth/{apiId}', methods: { POST: createClient, GET: listClients } },
  { template: '/api/apis/oauth/{apiId}/{clientId}', methods: { GET: getClient, DELETE: deleteClient } },
];
