/**
 * The examples/ tour (an API, two policies, keys, an OAuth API and its client) works with `gw standalone` too:
 * the same manifests users `kubectl apply` on a cluster with the chart installed (applying them to the
 * real API server is covered by crd-apiserver.test.ts; their kubeconform validation by chart-render).
 */
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

let upstream: Server;
let gw: Standalone;
let dir: string;

beforeAll(async () => {
  upstream = createServer((req, res) => res.end(JSON.stringify({ path: req.url })));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  const port = (upstream.address() as { port: number }).port;
  dir = tempDir('gw-tour-');
  for (const f of readdirSync('examples').filter((x) => x.endsWith('.yaml'))) {
    // The examples point at the demo upstream on :9090; this test's own upstream replaces it.
    writeFileSync(join(dir, f), readFileSync(join('examples', f), 'utf8').replaceAll('http://127.0.0.1:9090', `http://127.0.0.1:${port}`));
  }
  gw = await startStandalone(dir);
}, 30_000);

afterAll(async () => {
  await gw?.stop();
  upstream?.close();
  if (dir) cleanup(dir);
});

test('keyless API with its limit, keyed API with policies and keys, the OAuth client: all served from examples/', async () => {
  const codes: number[] = [];
  for (let i = 0; i < 4; i++) codes.push((await fetch(`${gw.gateway}/echo/hello`)).status);
  expect(codes).toEqual([200, 200, 200, 429]);

  expect((await fetch(`${gw.gateway}/orders/list`)).status).toBe(401);
  const ok = await fetch(`${gw.gateway}/orders/list`, { headers: { authorization: 'demo-key-0123456789abcdef' } });
  expect(ok.status).toBe(200);
  expect(await ok.json()).toEqual({ path: '/list' });
  // demo has bronze (90/30) and silver (100/10): silver's rate wins (docs/contract.md#policies).
  expect(ok.headers.get('x-ratelimit-limit')).toBe('100');
  expect((await fetch(`${gw.gateway}/orders/list`, { headers: { authorization: 'limited-key-0123456789' } })).status).toBe(200);
  expect((await fetch(`${gw.gateway}/orders/list`, { headers: { authorization: 'wrong-key' } })).status).toBe(403);

  const clients = await fetch(`${gw.admin}/api/apis/oauth/account`, { headers: { authorization: 'Bearer test-token' } });
  expect(clients.status).toBe(200);
  expect(JSON.stringify(await clients.json())).toContain('mobile-app');
  // the README's OAuth step: the client's token (client_credentials), then the API with it
  expect((await fetch(`${gw.gateway}/account/me`)).status).toBe(401);
  const token = await fetch(`${gw.gateway}/account/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from('mobile-app:change-me-0123456789abcdef').toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=client_credentials',
  });
  expect(token.status).toBe(200);
  const { access_token } = (await token.json()) as { access_token: string };
  const me = await fetch(`${gw.gateway}/account/me`, { headers: { authorization: `Bearer ${access_token}` } });
  expect([me.status, await me.json()]).toEqual([200, { path: '/me' }]);
});

