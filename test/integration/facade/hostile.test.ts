/**
 * Hostile inputs against the real facade over HTTP: each refused with the right code and a
 * {"status":"error"} body, and nothing created (no key, no client, no file) by any of them.
 */
import { readdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { SECRET, startFacade, TOKEN, type Facade } from './helpers.js';

let f: Facade;
beforeAll(async () => {
  f = await startFacade({ options: { gateway_urls: ['http://127.0.0.1:1'] } });
});
afterAll(async () => {
  await f.close();
});

/** Everything the facade could have created. */
async function state(): Promise<string> {
  const files = (() => {
    try {
      return readdirSync(join(f.dir, '.gw')).sort();
    } catch {
      return [];
    }
  })();
  const keys = (await f.backend.listKeys()).sort();
  const clients = (await f.backend.listClients('pets')).map((c) => c.spec.client_id).sort();
  return JSON.stringify({ files, keys, clients, top: readdirSync(f.dir).sort() });
}

/** A request with the path exactly as given (no client-side URL normalisation). */
function raw(
  method: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string>,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const u = new URL(f.url);
    const req = httpRequest({ host: u.hostname, port: u.port, path, method, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text) as unknown;
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const keyAuth = { 'x-gw-authorization': SECRET, 'content-type': 'application/json' };
const apiAuth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const deep = '['.repeat(200_000) + ']'.repeat(200_000);
const exactly1MiB = (head: string, tail: string): string =>
  head + 'x'.repeat(1024 * 1024 - head.length - tail.length) + tail;

type Case = [
  name: string,
  method: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string>,
  status: number,
  message?: RegExp,
];
const cases: Case[] = [
  // invalid JSON
  ['truncated JSON', 'POST', '/gw/keys/h1', '{"rate":', keyAuth, 400, /^malformed JSON/],
  ['trailing garbage', 'POST', '/gw/keys/h1', '{"rate":1} x', keyAuth, 400, /^malformed JSON/],
  ['empty body', 'POST', '/gw/keys/h1', '', keyAuth, 400, /^malformed JSON/],
  ['JSON with a BOM-less NUL', 'POST', '/gw/keys/h1', '{"rate":1,\u0000}', keyAuth, 400, /^malformed JSON/],
  ['200 000 levels of nesting', 'POST', '/gw/keys/h1', deep, keyAuth, 400],
  ['root is an array', 'POST', '/gw/keys/h1', '[1]', keyAuth, 400],
  ['root is null', 'POST', '/api/apis/oauth/pets', 'null', apiAuth, 400],
  ['root is a string', 'POST', '/api/proxy', '"GET /"', apiAuth, 400],
  // wrong types
  ['rate as a string', 'POST', '/gw/keys/h1', '{"rate":"fast"}', keyAuth, 400, /^rate: /],
  ['rate as Infinity (1e400)', 'POST', '/gw/keys/h1', '{"rate":1e400}', keyAuth, 400, /^rate: /],
  ['tags as a string', 'POST', '/gw/keys/h1', '{"tags":"a"}', keyAuth, 400, /^tags: /],
  ['access_rights as an array', 'POST', '/gw/keys/h1', '{"access_rights":[]}', keyAuth, 400, /^access_rights: /],
  ['quota_max as a float', 'POST', '/gw/keys/h1', '{"quota_max":1.5}', keyAuth, 400, /^quota_max: /],
  ['client meta_data as a string', 'POST', '/api/apis/oauth/pets', '{"meta_data":"x"}', apiAuth, 400, /^meta_data: /],
  ['client_id with a space', 'POST', '/api/apis/oauth/pets', '{"client_id":"a b"}', apiAuth, 400, /^client_id: /],
  ['client_id with CR/LF', 'POST', '/api/apis/oauth/pets', '{"client_id":"a\\r\\nb"}', apiAuth, 400, /^client_id: /],
  ['proxy url as a number', 'POST', '/api/proxy', '{"method":"GET","url":5}', apiAuth, 400, /^url: /],
  // unknown fields
  ['unknown top-level field', 'POST', '/gw/keys/h1', '{"rate":1,"bogus":true}', keyAuth, 400, /bogus/],
  ['__proto__ field', 'POST', '/gw/keys/h1', '{"__proto__":{"is_inactive":false}}', keyAuth, 400, /__proto__/],
  [
    '__proto__ entry in access_rights (zod would drop it: a key for every API)',
    'POST',
    '/gw/keys/h1',
    '{"access_rights":{"__proto__":{"api_id":"pets"}}}',
    keyAuth,
    400,
    /^access_rights\.__proto__: /,
  ],
  [
    '__proto__ entry in meta_data',
    'POST',
    '/gw/keys/h1',
    '{"meta_data":{"a":[{"__proto__":{}}]}}',
    keyAuth,
    400,
    /^meta_data\.a\.0\.__proto__: /,
  ],
  [
    '__proto__ entry in a client meta_data',
    'POST',
    '/api/apis/oauth/pets',
    '{"meta_data":{"__proto__":{"x":1}}}',
    apiAuth,
    400,
    /^meta_data\.__proto__: /,
  ],
  [
    'meta_data nested 2 000 deep (was a stack overflow: 500)',
    'POST',
    '/gw/keys/h1',
    `{"meta_data":{"a":${'['.repeat(2000)}${']'.repeat(2000)}}}`,
    keyAuth,
    400,
    /^\(root\): nested deeper than 64 levels \(at offset 80\)$/,
  ],
  [
    'client meta_data nested 3 000 deep',
    'POST',
    '/api/apis/oauth/pets',
    `{"meta_data":{"a":${'{"b":'.repeat(3000)}1${'}'.repeat(3000)}}}`,
    apiAuth,
    400,
    /nested deeper than 64 levels/,
  ],
  [
    'unknown nested field',
    'POST',
    '/gw/keys/h1',
    '{"access_rights":{"pets":{"limit":{"rate":1,"per":1,"bogus":1}}}}',
    keyAuth,
    400,
    /bogus/,
  ],
  ['unknown client field', 'POST', '/api/apis/oauth/pets', '{"grant_types":["x"]}', apiAuth, 400, /grant_types/],
  [
    'unknown proxy field',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://127.0.0.1:1/","follow":true}',
    apiAuth,
    400,
    /follow/,
  ],
  // huge bodies
  ['body of 1 MiB + 1 byte', 'POST', '/gw/keys/h1', JSON.stringify({ alias: 'x'.repeat(1024 * 1024) }), keyAuth, 413],
  [
    'huge OAuth body',
    'POST',
    '/api/apis/oauth/pets',
    JSON.stringify({ description: 'x'.repeat(2 * 1024 * 1024) }),
    apiAuth,
    413,
  ],
  // At the body limit exactly: accepted as a body, but its stored manifest (header, envelope) would pass
  // the loader's 1 MiB (the facade used to answer 200 for a key the gateway never served).
  [
    'key body of exactly 1 MiB',
    'POST',
    '/gw/keys/h1',
    exactly1MiB('{"meta_data":{"b":"', '"}}'),
    keyAuth,
    413,
    /^the key would be stored as a manifest of \d+ bytes, over the 1048576-byte limit/,
  ],
  [
    'client body of exactly 1 MiB',
    'POST',
    '/api/apis/oauth/pets',
    exactly1MiB('{"client_id":"big","meta_data":{"b":"', '"}}'),
    apiAuth,
    413,
    /^the client would be stored/,
  ],
  [
    'huge proxy body',
    'POST',
    '/api/proxy',
    JSON.stringify({ method: 'POST', url: 'http://127.0.0.1:1/', body: 'x'.repeat(1024 * 1024) }),
    apiAuth,
    413,
  ],
  ['key id over 1024 characters', 'POST', `/gw/keys/${'k'.repeat(1025)}`, '{}', keyAuth, 400, /^keyID: /],
  // path traversal in keyID (raw paths, not normalised by a client)
  ['keyID ".." encoded', 'POST', '/gw/keys/%2E%2E', '{}', keyAuth, 400, /^keyID: /],
  ['keyID "." encoded', 'PUT', '/gw/keys/%2e', '{}', keyAuth, 400, /^keyID: /],
  ['keyID ../../etc/passwd', 'POST', '/gw/keys/..%2F..%2Fetc%2Fpasswd', '{}', keyAuth, 400, /^keyID: /],
  ['keyID a/../../b', 'POST', '/gw/keys/a%2F..%2F..%2Fb', '{}', keyAuth, 400, /^keyID: /],
  ['keyID with backslashes', 'POST', '/gw/keys/..%5C..%5Cwin', '{}', keyAuth, 400, /^keyID: /],
  ['keyID .. on GET', 'GET', '/gw/keys/%2E%2E', undefined, keyAuth, 400, /^keyID: /],
  ['keyID .. on DELETE', 'DELETE', '/gw/keys/%2E%2E', undefined, keyAuth, 400, /^keyID: /],
  ['raw dot segments do not reach another route', 'POST', '/gw/keys/../../etc/passwd', '{}', keyAuth, 404],
  ['malformed percent-encoding', 'POST', '/gw/keys/%E0%A4%A', '{}', keyAuth, 400, /^keyID: /],
  ['hashed=true with a path', 'POST', '/gw/keys/..%2F..%2Fx?hashed=true', '{}', keyAuth, 400, /^keyID: /],
  // CR/LF injection
  ['keyID with CR/LF', 'POST', '/gw/keys/a%0D%0ASet-Cookie:%20x', '{}', keyAuth, 400, /^keyID: /],
  // a header value cannot carry surrounding whitespace: such a key could never be sent (it was 200 "added")
  [
    'keyID ending with a space',
    'POST',
    '/gw/keys/ws-123%20',
    '{}',
    keyAuth,
    400,
    /^keyID: must not begin or end with whitespace/,
  ],
  [
    'keyID beginning with a space',
    'PUT',
    '/gw/keys/%20ws-123',
    '{}',
    keyAuth,
    400,
    /^keyID: must not begin or end with whitespace/,
  ],
  // one written before the rule can still be read and deleted by name: 404 here, not 400
  ['keyID with a space, GET', 'GET', '/gw/keys/ws-123%20', undefined, keyAuth, 404],
  ['keyID with a space, DELETE', 'DELETE', '/gw/keys/%20ws-123', undefined, keyAuth, 404],
  ['keyID with NUL', 'POST', '/gw/keys/a%00b', '{}', keyAuth, 400, /^keyID: /],
  // bidi controls reorder what a log line or a listing shows; C1 controls, zero-width and line separators
  ['keyID with RLO (U+202E)', 'POST', '/gw/keys/abc%E2%80%AEgpj.exe', '{}', keyAuth, 400, /^keyID: .*U\+202E/],
  ['keyID with LRI (U+2066)', 'PUT', '/gw/keys/a%E2%81%A6b', '{}', keyAuth, 400, /^keyID: .*U\+2066/],
  ['keyID with ALM (U+061C)', 'POST', '/gw/keys/a%D8%9Cb', '{}', keyAuth, 400, /^keyID: .*U\+061C/],
  ['keyID with RLM (U+200F), GET', 'GET', '/gw/keys/a%E2%80%8Fb', undefined, keyAuth, 400, /^keyID: .*U\+200F/],
  ['keyID with NEL (U+0085, C1)', 'POST', '/gw/keys/a%C2%85b', '{}', keyAuth, 400, /^keyID: .*U\+0085/],
  ['keyID with a zero-width space', 'POST', '/gw/keys/a%E2%80%8Bb', '{}', keyAuth, 400, /^keyID: .*U\+200B/],
  ['keyID with U+2028', 'DELETE', '/gw/keys/a%E2%80%A8b', undefined, keyAuth, 400, /^keyID: .*U\+2028/],
  [
    'proxied header value with CR/LF',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://127.0.0.1:1/","headers":{"x-a":"1\\r\\nx-b: 2"}}',
    apiAuth,
    400,
    /^headers\.x-a: /,
  ],
  [
    'proxied header name with CR/LF',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://127.0.0.1:1/","headers":{"x-a\\r\\nx-b":"2"}}',
    apiAuth,
    400,
    /^headers/,
  ],
  [
    'proxied method with CR/LF',
    'POST',
    '/api/proxy',
    '{"method":"GET\\r\\nX: y","url":"http://127.0.0.1:1/"}',
    apiAuth,
    400,
    /^method: /,
  ],
  [
    'proxied url with CR/LF',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://127.0.0.1:1/x\\r\\nHost: evil"}',
    apiAuth,
    400,
    /^url: /,
  ],
  // URLs to other hosts, ports, schemes, userinfo
  [
    'proxy to another host',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://169.254.169.254/latest/meta-data"}',
    apiAuth,
    400,
    /^url: /,
  ],
  [
    'proxy to another port',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://127.0.0.1:2/"}',
    apiAuth,
    400,
    /^url: /,
  ],
  [
    'proxy to localhost (same place, other name)',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://localhost:1/"}',
    apiAuth,
    400,
    /^url: /,
  ],
  [
    'proxy with another scheme',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"https://127.0.0.1:1/"}',
    apiAuth,
    400,
    /^url: /,
  ],
  [
    'proxy with userinfo',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"http://a:b@127.0.0.1:1/"}',
    apiAuth,
    400,
    /^url: /,
  ],
  [
    'proxy with a gopher URL',
    'POST',
    '/api/proxy',
    '{"method":"GET","url":"gopher://127.0.0.1:1/"}',
    apiAuth,
    400,
    /^url: /,
  ],
  // content types and credentials
  [
    'form body',
    'POST',
    '/gw/keys/h1',
    'rate=1',
    { 'x-gw-authorization': SECRET, 'content-type': 'application/x-www-form-urlencoded' },
    415,
  ],
  ['no content type', 'POST', '/gw/keys/h1', '{}', { 'x-gw-authorization': SECRET }, 415],
  [
    'secret with one character more',
    'POST',
    '/gw/keys/h1',
    '{}',
    { ...keyAuth, 'x-gw-authorization': `${SECRET}x` },
    403,
  ],
  [
    'secret with one character less',
    'POST',
    '/gw/keys/h1',
    '{}',
    { ...keyAuth, 'x-gw-authorization': SECRET.slice(0, -1) },
    403,
  ],
  ['bearer token as the secret', 'POST', '/gw/keys/h1', '{}', { ...keyAuth, 'x-gw-authorization': TOKEN }, 403],
  ['no secret at all', 'POST', '/gw/keys/h1', '{}', { 'content-type': 'application/json' }, 401],
  [
    'secret as the bearer token',
    'POST',
    '/api/apis/oauth/pets',
    '{}',
    { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
    403,
  ],
];

describe('hostile inputs: refused with the right code, nothing created', () => {
  let before: string;
  beforeAll(async () => {
    before = await state();
  });

  // rest parameters: a row without a message must not make jest take the last parameter for `done`
  test.each(cases)('%s', async (...c: Case) => {
    const [, method, path, body, headers, status, message] = c;
    const r = await raw(method, path, body, headers);
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ status: 'error', message: expect.any(String) });
    if (message) expect((r.body as { message: string }).message).toMatch(message);
    expect(await state()).toBe(before);
  });

  test('the facade still works afterwards, and the same bodies done right do create', async () => {
    expect((await raw('POST', '/gw/keys/h1', '{"rate":1,"per":1}', keyAuth)).status).toBe(200);
    // letters outside ASCII are key material; only control and format characters are refused
    expect(
      (await raw('POST', '/gw/keys/caf%C3%A9-%D0%BA%D0%BB%D1%8E%D1%87', '{"rate":1,"per":1}', keyAuth)).status,
    ).toBe(200);
    expect((await raw('POST', '/api/apis/oauth/pets', '{"client_id":"ok"}', apiAuth)).status).toBe(200);
    expect(await state()).not.toBe(before);
  });

  test('no secret, token or injected text in any log line', () => {
    const logs = f.logs.join('');
    for (const s of [SECRET, TOKEN, 'Set-Cookie', 'etc/passwd', 'meta-data']) expect(logs).not.toContain(s);
  });
});
