/** POST /api/proxy against real local servers: forwarding, the open-relay refusals, 502 and 504. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '../../harness/ports.js';
import { conformance, startFacade, TOKEN, type Facade } from './helpers.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

let gateway: Server;
let gatewayUrl: string;
let elsewhere: Server;
let elsewhereUrl: string;
let hanging: Server;
let hangingUrl: string;
let closedUrl: string;
const seen: Seen[] = [];
let elsewhereHits = 0;
let f: Facade;

beforeAll(async () => {
  elsewhere = createServer((_req, res) => {
    elsewhereHits++;
    res.end('elsewhere');
  });
  elsewhereUrl = await listen(elsewhere);
  gateway = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.url === '/redirect') {
        res.writeHead(302, { location: `${elsewhereUrl}/stolen` });
        res.end();
      } else if (req.url === '/text') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('plain words');
      } else if (req.url === '/limited') {
        res.writeHead(429, {
          'content-type': 'application/json',
          'x-ratelimit-limit': '3',
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': '1700000000',
          'retry-after': '5',
        });
        res.end('{"error":"Rate Limit Exceeded"}');
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
        res.end(JSON.stringify({ method: req.method, url: req.url, body }));
      }
    });
  });
  gatewayUrl = await listen(gateway);
  hanging = createServer(() => {
    /* never answers */
  });
  hangingUrl = await listen(hanging);
  closedUrl = `http://127.0.0.1:${await freePort()}`;
  f = await startFacade({ options: { gateway_urls: [gatewayUrl, hangingUrl, closedUrl], proxy_timeout: 1 } });
});

afterAll(async () => {
  await f.close();
  hanging.closeAllConnections();
  for (const s of [gateway, elsewhere, hanging]) await new Promise((r) => s.close(r));
});

const proxy = (body: unknown, headers?: Record<string, string>) => f.call('POST', '/api/proxy', { body, headers });

test('forwards method, path, query, headers and a JSON body; answers {status_code, headers, body}', async () => {
  seen.length = 0;
  const r = await proxy({
    method: 'post',
    url: `${gatewayUrl}/pets/x?a=1`,
    headers: { 'X-Api-Key': 'k1', authorization: 'key-for-gateway' },
    body: { hello: 'world' },
  });
  expect(r.status).toBe(200);
  const b = r.body as { status_code: number; headers: Record<string, string>; body: unknown };
  expect(b.status_code).toBe(200);
  expect(b.headers['x-upstream']).toBe('yes');
  expect(b.body).toEqual({ method: 'POST', url: '/pets/x?a=1', body: '{"hello":"world"}' });
  expect(seen[0]!.headers['x-api-key']).toBe('k1');
  expect(seen[0]!.headers['content-type']).toBe('application/json');
  // the Authorization given in the body is the gateway credential and is sent...
  expect(seen[0]!.headers.authorization).toBe('key-for-gateway');
});

test("never forwards the caller's own bearer token", async () => {
  seen.length = 0;
  const r = await proxy({ method: 'GET', url: `${gatewayUrl}/pets` });
  expect(r.status).toBe(200);
  expect(seen[0]!.headers.authorization).toBeUndefined();
  expect(JSON.stringify(seen[0]!.headers)).not.toContain(TOKEN);
});

test('a string body is sent as is; a non-JSON response body comes back as a string', async () => {
  seen.length = 0;
  const r = await proxy({
    method: 'PUT',
    url: `${gatewayUrl}/text`,
    body: 'raw text',
    headers: { 'content-type': 'text/plain' },
  });
  expect(seen[0]!.body).toBe('raw text');
  expect((r.body as { body: unknown }).body).toBe('plain words');
});

test('gateway status codes and X-RateLimit headers pass through as data', async () => {
  const r = await proxy({ method: 'GET', url: `${gatewayUrl}/limited` });
  expect(r.status).toBe(200);
  const b = r.body as { status_code: number; headers: Record<string, string>; body: unknown };
  expect(b.status_code).toBe(429);
  expect(b.headers['x-ratelimit-remaining']).toBe('0');
  expect(b.body).toEqual({ error: 'Rate Limit Exceeded' });
});

test('a redirect to another origin is answered as it is, never followed', async () => {
  elsewhereHits = 0;
  const r = await proxy({ method: 'GET', url: `${gatewayUrl}/redirect` });
  expect(r.status).toBe(200);
  const b = r.body as { status_code: number; headers: Record<string, string> };
  expect(b.status_code).toBe(302);
  expect(b.headers.location).toBe(`${elsewhereUrl}/stolen`);
  expect(elsewhereHits).toBe(0);
});

describe('no open relay: refused with 400 before any connection', () => {
  const port = (u: string): number => Number(new URL(u).port);
  const cases: [string, () => string][] = [
    [
      'another port on the same host',
      () => `http://127.0.0.1:${port(gatewayUrl) === 65535 ? 1 : port(gatewayUrl) + 1}/x`,
    ],
    ['another host on the same port', () => `http://localhost:${port(gatewayUrl)}/x`],
    ['another scheme', () => `https://127.0.0.1:${port(gatewayUrl)}/x`],
    ['a server that is not a gateway', () => `${elsewhereUrl}/x`],
    ['userinfo in the URL', () => `http://user:pass@127.0.0.1:${port(gatewayUrl)}/x`],
    ['userinfo that hides the host', () => `http://127.0.0.1:${port(gatewayUrl)}@${new URL(elsewhereUrl).host}/x`],
    ['ftp:', () => `ftp://127.0.0.1:${port(gatewayUrl)}/x`],
    ['file:', () => 'file:///etc/passwd'],
    ['a relative URL', () => '/pets/x'],
    ['not a URL', () => 'http//nope'],
  ];
  test.each(cases)('%s', async (_name, url) => {
    elsewhereHits = 0;
    const before = seen.length;
    const r = await proxy({ method: 'GET', url: url() });
    expect(r.status).toBe(400);
    expect((r.body as { message: string }).message).toMatch(/^url: /);
    expect(elsewhereHits).toBe(0);
    expect(seen.length).toBe(before);
  });
});

test('schema: missing method/url, unknown field, bad method, bad header → 400 naming the field', async () => {
  expect(((await proxy({ url: `${gatewayUrl}/x` })).body as { message: string }).message).toMatch(/^method: /);
  expect(((await proxy({ method: 'GET' })).body as { message: string }).message).toMatch(/^url: /);
  expect(
    ((await proxy({ method: 'GET', url: `${gatewayUrl}/x`, extra: 1 })).body as { message: string }).message,
  ).toContain('extra');
  expect(((await proxy({ method: 'CONNECT', url: `${gatewayUrl}/x` })).body as { message: string }).message).toMatch(
    /^method: /,
  );
  expect(
    (
      (await proxy({ method: 'GET', url: `${gatewayUrl}/x`, headers: { 'bad header': 'x' } })).body as {
        message: string;
      }
    ).message,
  ).toMatch(/^headers/);
  const crlf = await proxy({ method: 'GET', url: `${gatewayUrl}/x`, headers: { 'x-a': 'a\r\nx-b: b' } });
  expect(crlf.status).toBe(400);
});

test('credentials: 401 without, 403 wrong', async () => {
  expect(
    (await f.call('POST', '/api/proxy', { body: { method: 'GET', url: `${gatewayUrl}/x` }, noAuth: true })).status,
  ).toBe(401);
  expect(
    (
      await f.call('POST', '/api/proxy', {
        body: { method: 'GET', url: `${gatewayUrl}/x` },
        noAuth: true,
        headers: { authorization: 'Bearer x' },
      })
    ).status,
  ).toBe(403);
});

test('502 when the gateway cannot be reached (closed port)', async () => {
  const r = await proxy({ method: 'GET', url: `${closedUrl}/x` });
  expect(r.status).toBe(502);
  expect(r.body).toEqual({ status: 'error', message: expect.stringContaining('unreachable') });
});

test('504 after proxy_timeout when the gateway never answers', async () => {
  const t0 = Date.now();
  const r = await proxy({ method: 'GET', url: `${hangingUrl}/x` });
  const ms = Date.now() - t0;
  expect(r.status).toBe(504);
  expect(r.body).toEqual({ status: 'error', message: expect.any(String) });
  expect(ms).toBeGreaterThanOrEqual(950);
  expect(ms).toBeLessThan(5000);
});

test('default origins: the gateway listen address given to createFacadeServer (0.0.0.0 means loopback too)', async () => {
  const g = await startFacade({ gatewayOrigins: [`http://0.0.0.0:${new URL(gatewayUrl).port}`] });
  try {
    const ok = await g.call('POST', '/api/proxy', { body: { method: 'GET', url: `${gatewayUrl}/pets` } });
    expect(ok.status).toBe(200);
    expect((await g.call('POST', '/api/proxy', { body: { method: 'GET', url: `${elsewhereUrl}/pets` } })).status).toBe(
      400,
    );
    f.recorded.push(...g.recorded);
  } finally {
    await g.close();
  }
});

test('OpenAPI conformance of every proxy response', () => {
  const { problems, checked } = conformance(f.recorded);
  expect(problems).toEqual([]);
  expect(checked).toBeGreaterThan(15);
});
