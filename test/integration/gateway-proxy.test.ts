/**
 * The gateway a request meets (docs/contract.md#request-path, #responses) through the real standalone process: key auth and
 * its status codes, access rights, the key-level 429, quota 403, headers, upstream failures.
 */
import { writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { freePort } from '../harness/ports.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';

async function call(url: string, headers: Record<string, string> = {}, method = 'GET') {
  const r = await request(url, { headers, method: method as 'GET' });
  const text = await r.body.text();
  return {
    status: r.statusCode,
    headers: r.headers,
    json: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : text,
  };
}

const key = (name: string, raw: string, spec: string): string => `
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: ${name}}
spec:
  key_hash: ${sha256hex(raw)}
${spec}
---`;

describe('gateway: auth, key limits, quota, headers, upstream errors', () => {
  let echo: { server: Server; url: string };
  let slow: Server;
  let gw: Standalone;
  let dir: string;
  let cfgDir: string;
  const now = Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    echo = await startEcho();
    slow = createServer((req, res) => {
      if (req.url?.includes('ratelimit')) {
        res.writeHead(200, { 'x-ratelimit-limit': '999', 'x-ratelimit-remaining': '999' });
        res.end('{}');
      }
      // otherwise never answers
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    const slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
    const closed = `http://127.0.0.1:${await freePort()}`;
    dir = tempDir();
    cfgDir = tempDir('gw-cfg-');
    writeFileSync(
      join(dir, 'apis.yaml'),
      `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: a}
spec:
  proxy: {listen_path: /a/, target_url: ${echo.url}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: b}
spec:
  auth: {auth_header_name: X-Api-Key}
  proxy: {listen_path: /b/, target_url: ${echo.url}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: c}
spec:
  proxy: {listen_path: /c/, target_url: ${echo.url}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: off}
spec:
  active: false
  use_keyless: true
  proxy: {listen_path: /off/, target_url: ${echo.url}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: down}
spec:
  use_keyless: true
  proxy: {listen_path: /down/, target_url: ${closed}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: slow}
spec:
  use_keyless: true
  proxy: {listen_path: /slow/, target_url: ${slowUrl}}
  global_rate_limit: {rate: 100, per: 1}
`,
    );
    writeFileSync(
      join(dir, 'keys.yaml'),
      [
        key('plain', 'plain-key', '  rate: 2\n  per: 60'),
        key('inactive', 'inactive-key', '  is_inactive: true'),
        key('expired', 'expired-key', `  expires: ${now - 10}`),
        key('future', 'future-key', `  expires: ${now + 3600}`),
        key('utf8', 'clé-naïve-0001', '  rate: 100\n  per: 60'),
        key(
          'onlya',
          'onlya-key',
          '  access_rights:\n    a:\n      api_id: a\n      allowed_urls: [{url: /allowed.*, methods: [GET]}]',
        ),
        key('quota', 'quota-key', '  quota_max: 2\n  quota_renewal_rate: 3600'),
        key('global3', 'global-key', '  rate: 3\n  per: 60'),
      ].join('\n'),
    );
    writeFileSync(join(cfgDir, 'gw.yaml'), 'upstream_timeout: 0.3\n');
    gw = await startStandalone(dir, ['--config', join(cfgDir, 'gw.yaml')]);
  });
  afterAll(async () => {
    await gw?.stop();
    echo?.server.close();
    slow?.closeAllConnections();
    slow?.close();
    cleanup(dir);
    cleanup(cfgDir);
  });

  test('missing key → 401, unknown / inactive / expired key → 403 with the spec bodies', async () => {
    expect(await call(`${gw.gateway}/a/x`)).toMatchObject({
      status: 401,
      json: { error: 'Authorization field missing' },
    });
    for (const empty of ['', '  ', 'Bearer ', 'bearer']) {
      expect(await call(`${gw.gateway}/a/x`, { authorization: empty })).toMatchObject({
        status: 401,
        json: { error: 'Authorization field missing' },
      });
    }
    for (const k of ['nope', 'inactive-key', 'expired-key']) {
      expect(await call(`${gw.gateway}/a/x`, { authorization: k })).toMatchObject({
        status: 403,
        json: { error: 'Access to this API has been disallowed' },
      });
    }
    expect((await call(`${gw.gateway}/a/x`, { authorization: 'future-key' })).status).toBe(200);
  });

  test('a key with non-ASCII characters, sent as UTF-8 bytes, matches the SHA-256 of its UTF-8 form', async () => {
    const utf8OnTheWire = Buffer.from('clé-naïve-0001', 'utf8').toString('latin1'); // undici writes header strings byte per character
    expect((await call(`${gw.gateway}/a/x`, { authorization: utf8OnTheWire })).status).toBe(200);
    expect((await call(`${gw.gateway}/a/x`, { authorization: `Bearer ${utf8OnTheWire}` })).status).toBe(200);
    expect((await call(`${gw.gateway}/a/x`, { authorization: 'clé-naïve-0001' })).status).toBe(403); // latin1 bytes: another key
  });

  test('raw or Bearer key, from the configured header', async () => {
    expect((await call(`${gw.gateway}/b/x`, { 'x-api-key': 'future-key' })).status).toBe(200);
    expect((await call(`${gw.gateway}/b/x`, { 'x-api-key': 'Bearer future-key' })).status).toBe(200);
    expect((await call(`${gw.gateway}/b/x`, { authorization: 'future-key' })).status).toBe(401);
  });

  test('access_rights and allowed_urls are enforced', async () => {
    expect((await call(`${gw.gateway}/a/allowed/1`, { authorization: 'onlya-key' })).status).toBe(200);
    expect((await call(`${gw.gateway}/a/other`, { authorization: 'onlya-key' })).status).toBe(403);
    expect((await call(`${gw.gateway}/a/allowed/1`, { authorization: 'onlya-key' }, 'POST')).status).toBe(403);
    expect((await call(`${gw.gateway}/c/allowed/1`, { authorization: 'onlya-key' })).status).toBe(403);
  });

  test('paths are normalised before the checks and forwarded normalised: dot segments and escapes do not get past allowed_urls', async () => {
    // sent exactly as written (a client library would resolve the dot segments itself)
    const raw = (path: string): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const u = new URL(gw.gateway);
        const req = httpRequest(
          { host: u.hostname, port: u.port, path, headers: { authorization: 'onlya-key' } },
          (res) => {
            let body = '';
            res.on('data', (d: Buffer) => (body += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    // allowed_urls /allowed.*: what the upstream would serve for these is /a/other
    for (const p of [
      '/a/allowed/../other',
      '/a/allowed/%2e%2e/other',
      '/a/allowed/%2E%2E/other',
      '/a/allowed/./../other',
    ]) {
      expect(`${p} → ${(await raw(p)).status}`).toBe(`${p} → 403`);
    }
    // an allowed path written oddly is served, and the upstream gets the normalised path (and the query as sent)
    const ok = await raw('/a//other/../%61llowed/./1?x=%2e%2e');
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as { path: string }).path).toBe('/allowed/1?x=%2e%2e');
  });

  test('key-level limit → 429 "Rate Limit Exceeded" with headers and Retry-After', async () => {
    const r1 = await call(`${gw.gateway}/a/x`, { authorization: 'plain-key' });
    expect(r1.status).toBe(200);
    expect(r1.headers['x-ratelimit-limit']).toBe('2');
    expect(r1.headers['x-ratelimit-remaining']).toBe('1');
    expect((await call(`${gw.gateway}/a/x`, { authorization: 'plain-key' })).status).toBe(200);
    const r3 = await call(`${gw.gateway}/a/x`, { authorization: 'plain-key' });
    expect(r3).toMatchObject({ status: 429, json: { error: 'Rate Limit Exceeded' } });
    expect(Number(r3.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(r3.headers['x-ratelimit-reset'])).toBeGreaterThan(now);
  });

  test('key-level global allowance is shared across APIs', async () => {
    const statuses = [];
    for (const p of ['a', 'b', 'c', 'a']) {
      const h: Record<string, string> = p === 'b' ? { 'x-api-key': 'global-key' } : { authorization: 'global-key' };
      statuses.push((await call(`${gw.gateway}/${p}/x`, h)).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  test('quota: exactly quota_max, then 403 "Quota exceeded" with Retry-After', async () => {
    expect((await call(`${gw.gateway}/a/x`, { authorization: 'quota-key' })).status).toBe(200);
    expect((await call(`${gw.gateway}/a/x`, { authorization: 'quota-key' })).status).toBe(200);
    const r = await call(`${gw.gateway}/a/x`, { authorization: 'quota-key' });
    expect(r).toMatchObject({ status: 403, json: { error: 'Quota exceeded' } });
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(3000);
  });

  test('inactive API → 404; unreachable upstream → 502 JSON; upstream X-RateLimit headers are replaced', async () => {
    expect((await call(`${gw.gateway}/off/x`)).status).toBe(404);
    const down = await call(`${gw.gateway}/down/x`);
    expect(down.status).toBe(502);
    expect(down.json).toHaveProperty('error');
    const r = await call(`${gw.gateway}/slow/ratelimit`);
    expect(r.status).toBe(200);
    expect(r.headers['x-ratelimit-limit']).toBe('100');
    expect(r.headers['x-ratelimit-remaining']).toBe('99');
  });

  test('an upstream that never answers → 504 JSON after the timeout', async () => {
    const r = await call(`${gw.gateway}/slow/hang`);
    expect(r.status).toBe(504);
    expect(r.json).toHaveProperty('error');
  });

  test('requests node:http cannot parse get JSON bodies too: 431 for an oversized header, 400 for a bad one (gateway and admin)', async () => {
    const rawStatus = (base: string, head: string) =>
      new Promise<{ status: number; body: unknown }>((resolve, reject) => {
        const u = new URL(base);
        const sock = connect(Number(u.port), u.hostname, () => sock.write(head));
        let text = '';
        sock.on('data', (c: Buffer) => (text += c.toString('latin1')));
        sock.on('error', reject);
        sock.on('close', () => {
          const [headPart = '', bodyPart = ''] = text.split('\r\n\r\n');
          resolve({
            status: Number(headPart.split(' ')[1]),
            body: bodyPart ? (JSON.parse(bodyPart) as unknown) : undefined,
          });
        });
      });
    const big = `GET /a/x HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(70_000)}\r\n\r\n`;
    const ctl = 'GET /a/x HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n';
    expect(await rawStatus(gw.gateway, big)).toEqual({
      status: 431,
      body: { error: 'Request Header Fields Too Large' },
    });
    expect(await rawStatus(gw.gateway, ctl)).toEqual({ status: 400, body: { error: 'Bad Request' } });
    // the admin listener serves the facade: its error shape (docs/contract.md#management-endpoints)
    expect(await rawStatus(gw.admin, big)).toEqual({
      status: 431,
      body: { status: 'error', message: 'Request Header Fields Too Large' },
    });
    expect((await call(`${gw.gateway}/a/x`, { authorization: 'future-key' })).status).toBe(200); // still serving
  });
});
