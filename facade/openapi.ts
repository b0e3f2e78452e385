/**
 * OpenAPI 3.1 description of the facade (served at GET /openapi.json). Request-body schemas are
 * generated from the zod schemas the facade validates with, so the document cannot drift from them.
 */
import { z } from 'zod';
import { KeySession } from '../crds/schemas/access-key.js';
import { OAuthClientBody } from './routes-oauth.js';
import { AuthorizeClientBody, IntrospectBody } from './routes-oauth-flow.js';

type Json = { [k: string]: unknown };

function fromZod(schema: z.ZodType): Json {
  const s = withoutKubernetesKeywords(
    z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }),
  ) as Json;
  delete s.$schema;
  return s;
}

/** The schemas' x-kubernetes-* keywords (CEL rules, preserve-unknown-fields) are for the CRDs, not for this document. */
function withoutKubernetesKeywords(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutKubernetesKeywords);
  if (typeof v !== 'object' || v === null) return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k]) => !k.startsWith('x-kubernetes-'))
      .map(([k, x]) => [k, withoutKubernetesKeywords(x)]),
  );
}

const str = { type: 'string' };
const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description: string): Json => ({
  description,
  content: { 'application/json': { schema } },
});
const err = (description: string): Json => json(ref('Error'), description);

const E = {
  400: err('Malformed JSON, a body or query parameter that breaks the schema (the message names the field)'),
  401: err('Credential missing'),
  403: err('Credential wrong'),
  404: err('Unknown API, key or client'),
  409: err('Conflict: the resource exists already or is owned by a hand-written manifest'),
  413: err('Body over 1 MiB'),
  415: err('Content-Type is not JSON'),
  429: {
    ...err('Too many requests to the facade from this client'),
    headers: { 'Retry-After': { schema: { type: 'integer' } } },
  },
  502: err('The gateway could not be reached'),
  504: err('The gateway did not answer within proxy_timeout'),
  notReady: err(
    'Cluster only: the resource was written and exists, but the controller did not report it Ready within the timeout ' +
      '(for a DELETE: it is being deleted, but the controller has not finished its cleanup); ' +
      'it takes effect once reconciled and repeating the request is safe',
  ),
  noStore: err('OAuth needs the shared store: gw facade was started without --redis'),
} as const;

/** The error answers an operation lists, by status (notReady: 504 of a cluster write; noStore: 503). */
type ErrorCase = keyof typeof E;
const STATUS_OF: Partial<Record<ErrorCase, number>> = { notReady: 504, noStore: 503 };
const READ: ErrorCase[] = [400, 401, 403, 404, 429];
const WRITE: ErrorCase[] = [400, 401, 403, 409, 413, 415, 429, 'notReady'];
const DELETE: ErrorCase[] = [400, 401, 403, 404, 409, 429, 'notReady'];

/** One operation: its 200 answer and its error answers (shared shapes); `form`: the body may be form-encoded too. */
function op(o: {
  id: string;
  summary?: string;
  security: Json[];
  parameters?: Json[];
  body?: Json;
  form?: boolean;
  ok: Json;
  errors: ErrorCase[];
}): Json {
  const responses: Json = { 200: o.ok };
  for (const e of o.errors) responses[STATUS_OF[e] ?? e] = E[e];
  const content: Json = { 'application/json': { schema: o.body } };
  if (o.form) content['application/x-www-form-urlencoded'] = { schema: o.body };
  return {
    operationId: o.id,
    ...(o.summary !== undefined ? { summary: o.summary } : {}),
    security: o.security,
    ...(o.parameters ? { parameters: o.parameters } : {}),
    ...(o.body ? { requestBody: { required: true, content } } : {}),
    responses,
  };
}

const bearer = [{ bearer: [] }];
const gwSecret = [{ gwSecret: [] }];
const apiIdParam = { name: 'apiId', in: 'path', required: true, schema: str, description: 'api_id of the API' };
const clientIdParam = { name: 'clientId', in: 'path', required: true, schema: str };
const keyIdParam = {
  name: 'keyID',
  in: 'path',
  required: true,
  schema: { type: 'string', minLength: 1, maxLength: 1024 },
  description:
    'The key (or its SHA-256 hex with hashed=true), one percent-encoded path segment. Refused with 400: "." or ".." path ' +
    'segments (also inside, e.g. "a/../b"), control characters (C0, DEL, C1) and format characters (bidi controls, ' +
    'zero-width characters, U+2028/U+2029)',
};
const hashedParam = {
  name: 'hashed',
  in: 'query',
  required: false,
  schema: { type: 'string', enum: ['true', 'false'] },
  description: 'keyID already is the SHA-256 hex of the key',
};
const suppressResetParam = {
  name: 'suppress_reset',
  in: 'query',
  required: false,
  schema: { type: 'string', enum: ['1'] },
  description: 'Keep the live quota instead of resetting it',
};

const clientProps = {
  client_id: str,
  client_name: str,
  description: str,
  policy_id: str,
  redirect_uri: str,
  meta_data: { type: 'object' },
  dcr_registration: {
    type: 'object',
    properties: { access_token: str, client_uri: str, provider: str },
    required: ['access_token', 'client_uri', 'provider'],
    additionalProperties: false,
  },
};
const clientRequired = [
  'client_id',
  'client_name',
  'description',
  'policy_id',
  'redirect_uri',
  'meta_data',
  'dcr_registration',
];

export const facadeOpenApi: Json = {
  openapi: '3.1.0',
  info: {
    title: 'gw management facade',
    version: '1',
    description:
      'Management endpoints of gw (docs/contract.md#management-endpoints). Errors are {"status":"error","message":"..."}; a known path with an ' +
      'undocumented method answers 405 with an Allow header; any path that is not listed answers 404.',
  },
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'One of access_tokens' },
      gwSecret: { type: 'apiKey', in: 'header', name: 'X-Gw-Authorization', description: 'The gateway secret' },
    },
    schemas: {
      Error: {
        type: 'object',
        properties: { status: { const: 'error' }, message: str },
        required: ['status', 'message'],
        additionalProperties: false,
      },
      OAuthClientRequest: fromZod(OAuthClientBody),
      OAuthClient: {
        type: 'object',
        properties: { ...clientProps, secret: str },
        required: [...clientRequired, 'secret'],
        additionalProperties: false,
      },
      OAuthClientSummary: {
        type: 'object',
        properties: clientProps,
        required: clientRequired,
        additionalProperties: false,
      },
      Deleted: {
        type: 'object',
        properties: { key: str, action: { const: 'deleted' }, status: { const: 'ok' } },
        required: ['key', 'action', 'status'],
        additionalProperties: false,
      },
      ProxyRequest: {
        type: 'object',
        properties: {
          method: { type: 'string', description: 'GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS (any case)' },
          url: { type: 'string', description: 'Absolute URL whose origin is one of gateway_urls' },
          headers: {
            type: 'object',
            additionalProperties: {
              anyOf: [str, { type: 'number' }, { type: 'boolean' }, { type: 'array', items: str }],
            },
          },
          body: { description: 'A string is sent as is; any other JSON value is sent as JSON' },
        },
        required: ['method', 'url'],
        additionalProperties: false,
      },
      ProxyResponse: {
        type: 'object',
        properties: {
          status_code: { type: 'integer' },
          headers: { type: 'object', additionalProperties: { anyOf: [str, { type: 'array', items: str }] } },
          body: { description: 'Parsed JSON when the response is JSON, else the text' },
        },
        required: ['status_code', 'headers', 'body'],
        additionalProperties: false,
      },
      KeySession: fromZod(KeySession),
      KeyResult: {
        type: 'object',
        properties: {
          key: str,
          key_hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
          action: { enum: ['added', 'modified', 'deleted'] },
          status: { const: 'ok' },
        },
        required: ['key', 'key_hash', 'action', 'status'],
        additionalProperties: false,
      },
      KeyList: {
        type: 'object',
        properties: { keys: { type: 'array', items: str } },
        required: ['keys'],
        additionalProperties: false,
      },
      AuthorizeClientRequest: fromZod(AuthorizeClientBody),
      AuthorizationCode: {
        type: 'object',
        properties: { code: str, redirect_to: { type: 'string', description: 'redirect_uri with code and state' } },
        required: ['code', 'redirect_to'],
        additionalProperties: false,
      },
      IntrospectRequest: fromZod(IntrospectBody),
      Introspection: {
        type: 'object',
        properties: {
          active: { type: 'boolean' },
          client_id: str,
          api_id: str,
          token_type: { enum: ['bearer', 'refresh_token'] },
          exp: { type: 'integer', description: 'unix seconds' },
          iat: { type: 'integer', description: 'unix seconds' },
        },
        required: ['active'],
        additionalProperties: false,
      },
      Health: {
        type: 'object',
        properties: {
          status: str,
          build: {
            type: 'object',
            description:
              '/healthz only: the package version, the Node.js version, the git commit when built from a checkout',
            properties: { version: str, node: str, commit: str },
            required: ['version', 'node'],
            additionalProperties: false,
          },
        },
        required: ['status'],
        additionalProperties: false,
      },
    },
  },
  paths: {
    '/api/apis/oauth/{apiId}': {
      parameters: [apiIdParam],
      post: op({
        id: 'createOAuthClient',
        summary: 'Create an OAuth client for an existing API (client_id and secret generated when absent or empty)',
        security: bearer,
        body: ref('OAuthClientRequest'),
        ok: json(ref('OAuthClient'), 'Client created'),
        errors: [...WRITE, 404],
      }),
      get: op({
        id: 'listOAuthClients',
        summary: 'OAuth clients of an API (secrets omitted)',
        security: bearer,
        ok: json({ type: 'array', items: ref('OAuthClientSummary') }, 'The clients'),
        errors: READ,
      }),
    },
    '/api/apis/oauth/{apiId}/{clientId}': {
      parameters: [apiIdParam, clientIdParam],
      get: op({
        id: 'getOAuthClient',
        security: bearer,
        ok: json(ref('OAuthClient'), 'The client, secret included'),
        errors: READ,
      }),
      delete: op({
        id: 'deleteOAuthClient',
        security: bearer,
        ok: json(ref('Deleted'), 'Client deleted'),
        errors: DELETE,
      }),
    },
    '/api/proxy': {
      post: op({
        id: 'proxyRequest',
        summary: 'Send one request to a gateway URL (gateway_urls only; redirects are not followed)',
        security: bearer,
        body: ref('ProxyRequest'),
        ok: json(ref('ProxyResponse'), 'The gateway answered (any status)'),
        errors: [400, 401, 403, 413, 415, 429, 502, 504],
      }),
    },
    '/gw/keys': {
      get: op({
        id: 'listKeys',
        security: gwSecret,
        ok: json(ref('KeyList'), 'SHA-256 hashes of every key'),
        errors: [401, 403, 429],
      }),
    },
    '/gw/keys/{keyID}': {
      parameters: [keyIdParam, hashedParam],
      post: op({
        id: 'addKey',
        summary: 'Create or import a key with this session (replaces it when it exists)',
        security: gwSecret,
        parameters: [suppressResetParam],
        body: ref('KeySession'),
        ok: json(ref('KeyResult'), 'action added or modified'),
        errors: WRITE,
      }),
      put: op({
        id: 'replaceKey',
        security: gwSecret,
        parameters: [suppressResetParam],
        body: ref('KeySession'),
        ok: json(ref('KeyResult'), 'action modified'),
        errors: [...WRITE, 404],
      }),
      get: op({
        id: 'getKey',
        summary: 'The session, with live quota_remaining and quota_renews',
        security: gwSecret,
        ok: json(ref('KeySession'), 'The session'),
        errors: READ,
      }),
      delete: op({ id: 'deleteKey', security: gwSecret, ok: json(ref('KeyResult'), 'action deleted'), errors: DELETE }),
    },
    '/gw/oauth/authorize-client': {
      post: op({
        id: 'authorizeOAuthClient',
        summary:
          "A code for an authorization the user consented to (the API owner's login page, after the gateway's " +
          'oauth/authorize): the client, redirect URI and PKCE parameters are checked as at the gateway',
        security: gwSecret,
        body: ref('AuthorizeClientRequest'),
        ok: json(ref('AuthorizationCode'), 'The code (single use, 60 s) and the redirect URI carrying it'),
        errors: [400, 401, 403, 404, 413, 415, 429, 'noStore'],
      }),
    },
    '/gw/oauth/introspect': {
      post: op({
        id: 'introspectOAuthToken',
        summary: 'RFC 7662: whether a token is active, and whose it is (JSON or form-encoded body)',
        security: gwSecret,
        body: ref('IntrospectRequest'),
        form: true,
        ok: json(ref('Introspection'), 'The token: {"active": false}, or active with its client, API and lifetime'),
        errors: [400, 401, 403, 413, 415, 429, 'noStore'],
      }),
    },
    '/openapi.json': {
      get: { operationId: 'openapi', responses: { 200: json({ type: 'object' }, 'This document'), 429: E[429] } },
    },
    '/healthz': {
      get: { operationId: 'healthz', responses: { 200: json(ref('Health'), 'Alive') } },
    },
    '/readyz': {
      get: { operationId: 'readyz', responses: { 200: json(ref('Health'), 'Ready'), 503: err('Not ready') } },
    },
  },
};
