/**
 * strip_auth_data (docs/proxy.md, "The credential and the upstream"): with it on, the header the API reads
 * its key (or OAuth bearer token) from does not reach the upstream; off (the default) it does. Through
 * `gw standalone` and real upstreams: an HTTP/1.1 echo and an h2c echo.
 */
import { writeFileSync } from 'node:fs';
import { createServer as createH2Server, type Http2Server } from 'node:http2';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { oauthManifests, postForm } from '../helpers/oauth.js';

const KEY = 'strip-test-key-0123456789';

/** The headers the upstream received, from its JSON echo. */
async function upstreamHeaders(url: string, headers: Record<string, string>): Promise<Record<string, string>> {
  const r = await request(url, { headers });
  const text = await r.body.text();
  expect({ url, status: r.statusCode }).toEqual({ url, status: 200 });
  return (JSON.parse(text) as { headers: Record<string, string> }).headers;
}

const api = (name: string, listen: string, target: string, extra: string): string => `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}}
spec:
${extra}
  proxy: {listen_path: ${listen}, target_url: '${target}'}
---`;

describe('strip_auth_data', () => {
  let echo: { server: Server; url: string };
  let h2: Http2Server;
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    echo = await startEcho();
    h2 = createH2Server((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ headers: req.headers }));
    });
    await new Promise<void>((r) => h2.listen(0, '127.0.0.1', r));
    const h2c = `h2c://127.0.0.1:${(h2.address() as { port: number }).port}`;
    dir = tempDir('gw-strip-');
    writeFileSync(
      join(dir, 'apis.yaml'),
      [
        api('kept', '/kept/', echo.url, '  auth: {auth_header_name: X-Api-Key}'),
        api('stripped', '/stripped/', echo.url, '  auth: {auth_header_name: X-Api-Key}\n  strip_auth_data: true'),
        api('bearer', '/bearer/', echo.url, '  strip_auth_data: true'),
        api('h2', '/h2/', h2c, '  strip_auth_data: true'),
        api('open', '/open/', echo.url, '  use_keyless: true\n  strip_auth_data: true'),
        `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: oas}
spec:
  oas:
    openapi: 3.0.3
    info: {title: Oas, version: 1.0.0}
    paths: {}
    x-gw-api-gateway:
      info: {id: oas}
      server: {listenPath: {value: /oas/}, authentication: {enabled: true, stripAuthorizationData: true}}
      upstream: {url: '${echo.url}'}
---`,
        `
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: k}
spec: {key_hash: ${sha256hex(KEY)}}
---`,
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'oauth.yaml'),
      oauthManifests({
        api: 'oa',
        target: echo.url,
        policy: 'roomy',
        rate: 1000,
        per: 60,
        clients: [{ name: 'app', id: 'app', secret: 'app-secret-0123456789' }],
      }).replace('  use_oauth2: true', '  use_oauth2: true\n  strip_auth_data: true'),
    );
    gw = await startStandalone(dir, []);
  });
  afterAll(async () => {
    await gw?.stop();
    echo?.server.close();
    h2?.close();
    cleanup(dir);
  });

  test('off (the default): the key header reaches the upstream', async () => {
    const h = await upstreamHeaders(`${gw.gateway}/kept/x`, { 'x-api-key': KEY, 'x-other': 'o' });
    expect(h['x-api-key']).toBe(KEY);
    expect(h['x-other']).toBe('o');
  });

  test('on: the key header (a custom auth_header_name) is removed, the other headers are not', async () => {
    const h = await upstreamHeaders(`${gw.gateway}/stripped/x`, {
      'x-api-key': KEY,
      authorization: 'Basic dXNlcjpwYXNz',
      'x-other': 'o',
    });
    expect(h['x-api-key']).toBeUndefined();
    // only the header the key is read from is the gateway's: another one is the upstream's business
    expect(h.authorization).toBe('Basic dXNlcjpwYXNz');
    expect(h['x-other']).toBe('o');
  });

  test('on: Authorization (raw or Bearer) is removed; also towards an h2c upstream and in the OAS form', async () => {
    for (const value of [KEY, `Bearer ${KEY}`]) {
      expect((await upstreamHeaders(`${gw.gateway}/bearer/x`, { authorization: value })).authorization).toBeUndefined();
      expect((await upstreamHeaders(`${gw.gateway}/h2/x`, { authorization: value })).authorization).toBeUndefined();
      expect((await upstreamHeaders(`${gw.gateway}/oas/x`, { authorization: value })).authorization).toBeUndefined();
    }
  });

  test('on a keyless API nothing is read, so nothing is removed', async () => {
    expect(
      (await upstreamHeaders(`${gw.gateway}/open/x`, { authorization: 'upstream-credential' })).authorization,
    ).toBe('upstream-credential');
  });

  test('on an OAuth API: the bearer token does not reach the upstream', async () => {
    const t = await postForm(`${gw.gateway}/oa/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: 'app',
      client_secret: 'app-secret-0123456789',
    });
    expect(t.status).toBe(200);
    const token = (t.body as { access_token: string }).access_token;
    const h = await upstreamHeaders(`${gw.gateway}/oa/x`, { authorization: `Bearer ${token}` });
    expect(h.authorization).toBeUndefined();
  });
});
