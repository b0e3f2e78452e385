/**
 * GET /openapi.json checked against the real responses: every (operation, status) the document lists is
 * reached here over real HTTP, every response body validates (deeply) against its documented schema with
 * no undocumented field, every accepted request body validates against the documented request schema,
 * and no status the facade answered is undocumented.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NotReadyError, type ResourceBackend } from '../../../facade/backend.js';
import { ApiDefinitionResource } from '../../../crds/kinds.js';
import { compileConfig } from '../../../compiler/compile-config.js';
import { MemoryClientDirectory } from '../../../stores/oauth/client-directories.js';
import { OAuthServer } from '../../../stores/oauth/grants.js';
import { MemoryTokenStore } from '../../../stores/oauth/tokens-memory.js';
import { sha256hex } from '../../../lib/hash.js';
import { facadeOpenApi } from '../../../facade/openapi.js';
import { freePort } from '../../harness/ports.js';
import {
  conformance,
  documentedResponses,
  observedResponses,
  requestConformance,
  startFacade,
  validateSchema,
  type Facade,
  type Recorded,
} from './helpers.js';

let gateway: Server;
let gatewayUrl: string;
let hanging: Server;
let hangingUrl: string;
let closedUrl: string;
let f: Facade;
const recorded: Recorded[] = [];

/** An OAuth API with one client, for the facade's OAuth flow routes (codes and introspection in memory). */
const OAUTH_CONFIG = compileConfig(
  [
    ApiDefinitionResource.parse({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'ApiDefinition',
      metadata: { name: 'oapets', namespace: 'default' },
      spec: {
        use_oauth2: true,
        oauth_meta: { auth_login_redirect: 'https://login.example/consent' },
        proxy: { listen_path: '/oapets/' },
      },
    }),
  ],
  [],
).config;
const OAUTH_CLIENT = {
  namespace: 'default',
  name: 'app',
  api_id: 'oapets',
  client_id: 'app',
  redirect_uri: 'https://app.example/cb',
  secret_hash: sha256hex('app-secret'),
};
const oauthClients = new MemoryClientDirectory();
oauthClients.replace([OAUTH_CLIENT]);
const oauthServer = new OAuthServer(new MemoryTokenStore(), oauthClients);

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const HAND = `
apiVersion: v1
kind: Secret
metadata: {name: hand-key}
stringData: {key: hand-written-key}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: hand}
spec: {rate: 9, per: 9, secretRef: {name: hand-key}}
---
apiVersion: v1
kind: Secret
metadata: {name: hand-client}
stringData: {secret: hand-client-secret}
---
apiVersion: gw.io/v1alpha1
kind: OAuthClient
metadata: {name: hand}
spec: {api_id: pets, client_id: hand-client, secretRef: {name: hand-client, key: secret}}
`;

beforeAll(async () => {
  gateway = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-ratelimit-limit': '10',
        'x-ratelimit-remaining': '9',
        'x-ratelimit-reset': '1',
      });
      res.end(JSON.stringify({ ok: true, list: [1, 'a'] }));
    });
  });
  gatewayUrl = await listen(gateway);
  hanging = createServer(() => {
    /* never answers */
  });
  hangingUrl = await listen(hanging);
  closedUrl = `http://127.0.0.1:${await freePort()}`;
  f = await startFacade({
    options: { gateway_urls: [gatewayUrl, hangingUrl, closedUrl], proxy_timeout: 0.3 },
    oauth: { server: oauthServer, config: () => OAUTH_CONFIG },
  });
  writeFileSync(join(f.dir, 'hand.yaml'), HAND);
  await f.source.refresh();
});

afterAll(async () => {
  recorded.length = 0;
  await f.close();
  hanging.closeAllConnections();
  for (const s of [gateway, hanging]) await new Promise((r) => s.close(r));
});

const BIG = JSON.stringify({ alias: 'x'.repeat(1024 * 1024 + 1) });
const TEXT = { headers: { 'content-type': 'text/plain' } };
const WRONG_BEARER = { noAuth: true, headers: { authorization: 'Bearer wrong' } };
const WRONG_SECRET = { noAuth: true, headers: { 'x-gw-authorization': 'wrong' } };

test('GET /openapi.json serves the OpenAPI 3.1 document', async () => {
  const r = await f.call('GET', '/openapi.json');
  expect(r.status).toBe(200);
  expect(r.body).toEqual(facadeOpenApi);
  expect((r.body as { openapi: string }).openapi).toBe('3.1.0');
});

test('OAuth client operations: every documented status', async () => {
  const c = (m: string, p: string, init?: Parameters<Facade['call']>[2]) => f.call(m, p, init);
  // POST
  expect(
    (
      await c('POST', '/api/apis/oauth/pets', {
        body: { client_id: 'doc-client', meta_data: { a: 1 }, policy_id: 'gold' },
      })
    ).status,
  ).toBe(200);
  expect((await c('POST', '/api/apis/oauth/pets', { body: { colour: 'red' } })).status).toBe(400);
  expect((await c('POST', '/api/apis/oauth/pets', { body: {}, noAuth: true })).status).toBe(401);
  expect((await c('POST', '/api/apis/oauth/pets', { body: {}, ...WRONG_BEARER })).status).toBe(403);
  expect((await c('POST', '/api/apis/oauth/nope', { body: {} })).status).toBe(404);
  expect((await c('POST', '/api/apis/oauth/pets', { body: { client_id: 'doc-client' } })).status).toBe(409);
  expect((await c('POST', '/api/apis/oauth/pets', { body: BIG })).status).toBe(413);
  expect((await c('POST', '/api/apis/oauth/pets', { body: '{}', ...TEXT })).status).toBe(415);
  // list
  expect((await c('GET', '/api/apis/oauth/pets')).status).toBe(200);
  expect((await c('GET', '/api/apis/oauth/%zz')).status).toBe(400);
  expect((await c('GET', '/api/apis/oauth/pets', { noAuth: true })).status).toBe(401);
  expect((await c('GET', '/api/apis/oauth/pets', WRONG_BEARER)).status).toBe(403);
  expect((await c('GET', '/api/apis/oauth/nope')).status).toBe(404);
  // get one
  expect((await c('GET', '/api/apis/oauth/pets/doc-client')).status).toBe(200);
  expect((await c('GET', '/api/apis/oauth/pets/hand-client')).status).toBe(200);
  expect((await c('GET', '/api/apis/oauth/pets/%zz')).status).toBe(400);
  expect((await c('GET', '/api/apis/oauth/pets/doc-client', { noAuth: true })).status).toBe(401);
  expect((await c('GET', '/api/apis/oauth/pets/doc-client', WRONG_BEARER)).status).toBe(403);
  expect((await c('GET', '/api/apis/oauth/pets/nobody')).status).toBe(404);
  // delete
  expect((await c('DELETE', '/api/apis/oauth/pets/%zz')).status).toBe(400);
  expect((await c('DELETE', '/api/apis/oauth/pets/doc-client', { noAuth: true })).status).toBe(401);
  expect((await c('DELETE', '/api/apis/oauth/pets/doc-client', WRONG_BEARER)).status).toBe(403);
  expect((await c('DELETE', '/api/apis/oauth/pets/hand-client')).status).toBe(409);
  expect((await c('DELETE', '/api/apis/oauth/pets/doc-client')).status).toBe(200);
  expect((await c('DELETE', '/api/apis/oauth/pets/doc-client')).status).toBe(404);
});

test('OAuth flow operations (authorize-client, introspect): every documented status', async () => {
  const c = (m: string, p: string, init?: Parameters<Facade['call']>[2]) => f.call(m, p, init);
  const consent = {
    api_id: 'oapets',
    client_id: 'app',
    redirect_uri: 'https://app.example/cb',
    response_type: 'code',
    state: 'st',
  };
  const code = await c('POST', '/gw/oauth/authorize-client', { body: consent });
  expect(code.status).toBe(200);
  expect(new URL((code.body as { redirect_to: string }).redirect_to).searchParams.get('state')).toBe('st');
  const wrongUri = { ...consent, redirect_uri: 'https://evil.example/cb' };
  expect((await c('POST', '/gw/oauth/authorize-client', { body: wrongUri })).status).toBe(400);
  expect((await c('POST', '/gw/oauth/authorize-client', { body: consent, noAuth: true })).status).toBe(401);
  expect((await c('POST', '/gw/oauth/authorize-client', { body: consent, ...WRONG_SECRET })).status).toBe(403);
  expect((await c('POST', '/gw/oauth/authorize-client', { body: { ...consent, api_id: 'nope' } })).status).toBe(404);
  expect((await c('POST', '/gw/oauth/authorize-client', { body: BIG })).status).toBe(413);
  expect((await c('POST', '/gw/oauth/authorize-client', { body: '{}', ...TEXT })).status).toBe(415);

  const api = OAUTH_CONFIG.apis[0]!;
  const issued = await oauthServer.token(
    api,
    api.oauth!,
    OAUTH_CLIENT,
    new URLSearchParams({ grant_type: 'client_credentials' }),
  );
  const active = await c('POST', '/gw/oauth/introspect', { body: { token: issued.answer.access_token } });
  expect(active.status).toBe(200);
  expect(active.body).toMatchObject({ active: true, client_id: 'app', api_id: 'oapets', token_type: 'bearer' });
  const form = await c('POST', '/gw/oauth/introspect', {
    body: 'token=unknown',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  expect(form.body).toEqual({ active: false });
  expect((await c('POST', '/gw/oauth/introspect', { body: {} })).status).toBe(400);
  expect((await c('POST', '/gw/oauth/introspect', { body: { token: 't' }, noAuth: true })).status).toBe(401);
  expect((await c('POST', '/gw/oauth/introspect', { body: { token: 't' }, ...WRONG_SECRET })).status).toBe(403);
  expect((await c('POST', '/gw/oauth/introspect', { body: BIG })).status).toBe(413);
  expect((await c('POST', '/gw/oauth/introspect', { body: 'token=t', ...TEXT })).status).toBe(415);

  // a facade without the shared store (gw facade without --redis): 503 naming it
  const bare = await startFacade();
  try {
    for (const [p, body] of [
      ['/gw/oauth/authorize-client', consent],
      ['/gw/oauth/introspect', { token: 't' }],
    ] as const) {
      const r = await bare.call('POST', p, { body });
      expect([p, r.status]).toEqual([p, 503]);
      expect((r.body as { message: string }).message).toMatch(/--redis/);
    }
  } finally {
    recorded.push(...bare.recorded);
    await bare.close();
  }
});

test('proxy: every documented status', async () => {
  const p = (body: unknown, init: Parameters<Facade['call']>[2] = {}) =>
    f.call('POST', '/api/proxy', { body, ...init });
  expect(
    (
      await p({
        method: 'post',
        url: `${gatewayUrl}/x`,
        headers: { 'x-a': 'b', 'x-n': 1, 'x-l': ['a', 'b'] },
        body: { n: 1 },
      })
    ).status,
  ).toBe(200);
  expect((await p({ method: 'GET', url: 'http://elsewhere.invalid/x' })).status).toBe(400);
  expect((await p({ method: 'GET', url: `${gatewayUrl}/x` }, { noAuth: true })).status).toBe(401);
  expect((await p({ method: 'GET', url: `${gatewayUrl}/x` }, WRONG_BEARER)).status).toBe(403);
  expect((await p(BIG)).status).toBe(413);
  expect((await p('{}', TEXT)).status).toBe(415);
  expect((await p({ method: 'GET', url: `${closedUrl}/x` })).status).toBe(502);
  expect((await p({ method: 'GET', url: `${hangingUrl}/x` })).status).toBe(504);
});

test('key operations: every documented status', async () => {
  const c = (m: string, p: string, init?: Parameters<Facade['call']>[2]) => f.call(m, p, init);
  const full = {
    rate: 5,
    per: 1,
    quota_max: 10,
    apply_policies: ['gold'],
    access_rights: {
      pets: {
        api_id: 'pets',
        versions: ['v1'],
        allowed_urls: [{ url: '/x', methods: ['GET'] }],
        limit: { rate: 1, per: 1 },
      },
    },
    meta_data: { a: 'b' },
    tags: ['t'],
  };
  // POST
  expect((await c('POST', '/gw/keys/doc-key', { body: full })).status).toBe(200);
  expect((await c('POST', '/gw/keys/doc-key?suppress_reset=1', { body: full })).status).toBe(200);
  expect((await c('POST', '/gw/keys/doc-key', { body: { rate: 'x' } })).status).toBe(400);
  expect((await c('POST', '/gw/keys/doc-key', { body: {}, noAuth: true })).status).toBe(401);
  expect((await c('POST', '/gw/keys/doc-key', { body: {}, ...WRONG_SECRET })).status).toBe(403);
  expect((await c('POST', '/gw/keys/hand-written-key', { body: {} })).status).toBe(409);
  expect((await c('POST', '/gw/keys/doc-key', { body: BIG })).status).toBe(413);
  expect((await c('POST', '/gw/keys/doc-key', { body: '{}', ...TEXT })).status).toBe(415);
  // PUT
  expect((await c('PUT', '/gw/keys/doc-key', { body: { rate: 6, per: 1 } })).status).toBe(200);
  expect((await c('PUT', '/gw/keys/doc-key', { body: { bogus: 1 } })).status).toBe(400);
  expect((await c('PUT', '/gw/keys/doc-key', { body: {}, noAuth: true })).status).toBe(401);
  expect((await c('PUT', '/gw/keys/doc-key', { body: {}, ...WRONG_SECRET })).status).toBe(403);
  expect((await c('PUT', '/gw/keys/nobody', { body: {} })).status).toBe(404);
  expect((await c('PUT', '/gw/keys/hand-written-key', { body: {} })).status).toBe(409);
  expect((await c('PUT', '/gw/keys/doc-key', { body: BIG })).status).toBe(413);
  expect((await c('PUT', '/gw/keys/doc-key', { body: '{}', ...TEXT })).status).toBe(415);
  // GET one, with live quota values
  f.quotas.set((await import('../../../lib/hash.js')).sha256hex('doc-key'), { remaining: 3, renews: 1_900_000_000 });
  expect((await c('GET', '/gw/keys/doc-key')).status).toBe(200);
  expect((await c('POST', '/gw/keys/full-doc-key', { body: full })).status).toBe(200);
  expect((await c('GET', '/gw/keys/full-doc-key')).status).toBe(200);
  expect((await c('GET', '/gw/keys/doc-key?hashed=yes')).status).toBe(400);
  expect((await c('GET', '/gw/keys/doc-key', { noAuth: true })).status).toBe(401);
  expect((await c('GET', '/gw/keys/doc-key', WRONG_SECRET)).status).toBe(403);
  expect((await c('GET', '/gw/keys/nobody')).status).toBe(404);
  // list
  expect((await c('GET', '/gw/keys')).status).toBe(200);
  expect((await c('GET', '/gw/keys', { noAuth: true })).status).toBe(401);
  expect((await c('GET', '/gw/keys', WRONG_SECRET)).status).toBe(403);
  // DELETE
  expect((await c('DELETE', '/gw/keys/doc-key?hashed=yes')).status).toBe(400);
  expect((await c('DELETE', '/gw/keys/doc-key', { noAuth: true })).status).toBe(401);
  expect((await c('DELETE', '/gw/keys/doc-key', WRONG_SECRET)).status).toBe(403);
  expect((await c('DELETE', '/gw/keys/hand-written-key')).status).toBe(409);
  expect((await c('DELETE', '/gw/keys/doc-key')).status).toBe(200);
  expect((await c('DELETE', '/gw/keys/doc-key')).status).toBe(404);
});

test('health probes: 200, and readyz 503 while not ready', async () => {
  expect((await f.call('GET', '/healthz')).status).toBe(200);
  expect((await f.call('GET', '/readyz')).status).toBe(200);
  const g = await startFacade({ ready: () => false });
  try {
    expect((await g.call('GET', '/readyz')).status).toBe(503);
  } finally {
    recorded.push(...g.recorded);
    await g.close();
  }
});

test('504 when a write is stored but not reported Ready (a backend like the cluster one whose controller lags)', async () => {
  const g = await startFacade({
    wrapBackend: (b) =>
      Object.assign(Object.create(b) as ResourceBackend, {
        putKey: async (...a: Parameters<ResourceBackend['putKey']>) => {
          await b.putKey(...a);
          throw new NotReadyError('AccessKey default/key-x was written and exists, but is not Ready after 10 s');
        },
        putClient: async (...a: Parameters<ResourceBackend['putClient']>) => {
          await b.putClient(...a);
          throw new NotReadyError('OAuthClient default/oauth-x was written and exists, but is not Ready after 10 s');
        },
        deleteKey: async (...a: Parameters<ResourceBackend['deleteKey']>) => {
          if (!(await b.deleteKey(...a))) return false;
          throw new NotReadyError('AccessKey default/key-x is being deleted, but still exists after 10 s');
        },
        deleteClient: async (...a: Parameters<ResourceBackend['deleteClient']>) => {
          if (!(await b.deleteClient(...a))) return false;
          throw new NotReadyError('OAuthClient default/oauth-x is being deleted, but still exists after 10 s');
        },
      }),
  });
  try {
    const k = await g.call('POST', '/gw/keys/slow-key', { body: { rate: 1, per: 1 } });
    expect(k.status).toBe(504);
    expect((k.body as { message: string }).message).toMatch(/written and exists, but is not Ready/);
    expect((await g.call('GET', '/gw/keys/slow-key')).status).toBe(200); // it does exist
    expect((await g.call('PUT', '/gw/keys/slow-key', { body: { rate: 2, per: 1 } })).status).toBe(504);
    expect((await g.call('POST', '/api/apis/oauth/pets', { body: { client_id: 'slow-client' } })).status).toBe(504);
    const dk = await g.call('DELETE', '/gw/keys/slow-key');
    expect(dk.status).toBe(504);
    expect((dk.body as { message: string }).message).toMatch(/is being deleted, but still exists/);
    expect((await g.call('DELETE', '/api/apis/oauth/pets/slow-client')).status).toBe(504);
  } finally {
    recorded.push(...g.recorded);
    await g.close();
  }
});

test('429 with Retry-After on every rate-limited operation', async () => {
  const g = await startFacade({ rateLimit: { rate: 1, per: 60 } });
  try {
    expect((await g.call('GET', '/gw/keys')).status).toBe(200);
    const ops: [string, string, unknown?][] = [
      ['POST', '/api/apis/oauth/pets', {}],
      ['GET', '/api/apis/oauth/pets'],
      ['GET', '/api/apis/oauth/pets/x'],
      ['DELETE', '/api/apis/oauth/pets/x'],
      ['POST', '/api/proxy', {}],
      ['GET', '/gw/keys'],
      ['POST', '/gw/keys/k', {}],
      ['PUT', '/gw/keys/k', {}],
      ['GET', '/gw/keys/k'],
      ['DELETE', '/gw/keys/k'],
      ['GET', '/openapi.json'],
      ['POST', '/gw/oauth/authorize-client', {}],
      ['POST', '/gw/oauth/introspect', {}],
    ];
    for (const [m, p, body] of ops) {
      const r = await g.call(m, p, body === undefined ? {} : { body });
      expect([`${m} ${p}`, r.status]).toEqual([`${m} ${p}`, 429]);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect((await g.call('GET', '/healthz')).status).toBe(200); // probes are not limited
  } finally {
    recorded.push(...g.recorded);
    await g.close();
  }
});

describe('the document against the responses above', () => {
  const all = (): Recorded[] => [...f.recorded, ...recorded];

  test('every documented (operation, status) was answered by the real facade', () => {
    const observed = new Set(observedResponses(all()));
    expect(documentedResponses().filter((d) => !observed.has(d))).toEqual([]);
  });

  test('every response: status documented, body valid against its schema, no undocumented field', () => {
    const { problems, checked } = conformance(all());
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(75);
  });

  test('every accepted request body is valid against the documented request schema', () => {
    const { problems, checked } = requestConformance(all());
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThanOrEqual(6);
  });

  test('the schema check can fail: an undocumented field, a wrong type and a missing field are reported', () => {
    const schema = { $ref: '#/components/schemas/KeyResult' };
    expect(validateSchema(schema, { key: 'k', key_hash: 'a'.repeat(64), action: 'added', status: 'ok' })).toEqual([]);
    expect(
      validateSchema(schema, { key: 'k', key_hash: 'a'.repeat(64), action: 'added', status: 'ok', extra: 1 }),
    ).toEqual(['$: undocumented field extra']);
    expect(validateSchema(schema, { key: 1, key_hash: 'xyz', action: 'gone' }).length).toBe(4);
    const client = { $ref: '#/components/schemas/OAuthClient' };
    expect(validateSchema(client, { client_id: 'c' }).join(' ')).toContain('missing required field secret');
  });
});
