/**
 * Throttling through HTTP (docs/contract.md#throttling) against `gw standalone` and a real upstream: a waiting request
 * whose client leaves is dropped (it reaches no upstream, uses no rate allowance or quota, frees its
 * waiting slot at once), and one whose key is deleted while it waits is refused 403 instead of admitted.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';

const SECRET = { 'x-gw-authorization': 'test-secret', 'content-type': 'application/json' };

describe('throttled requests through HTTP', () => {
  let upstream: Server;
  let paths: string[];
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    paths = [];
    upstream = createServer((req, res) => {
      paths.push(req.url ?? '');
      res.end('{}');
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    dir = tempDir();
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    writeFileSync(
      join(dir, 'api.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: t}\nspec: {proxy: {listen_path: /t/, target_url: '${url}'}}\n`,
    );
    writeFileSync(join(dir, 'gw.yaml'), 'max_throttled_requests: 2\ndrl_threshold: 1000\n');
    gw = await startStandalone(dir, ['--config', join(dir, 'gw.yaml')]);
  });
  afterAll(async () => {
    await gw?.stop();
    upstream?.close();
    cleanup(dir);
  });

  const addKey = async (key: string): Promise<void> => {
    const body = JSON.stringify({
      rate: 1,
      per: 3,
      throttle_interval: 0.5,
      throttle_retry_limit: 8,
      quota_max: 10,
      quota_renewal_rate: 3600,
    });
    const r = await request(`${gw.admin}/gw/keys/${key}`, { method: 'POST', headers: SECRET, body });
    expect(r.statusCode).toBe(200);
    await r.body.dump();
  };
  const get = async (key: string, path: string): Promise<number> => {
    const r = await request(`${gw.gateway}/t${path}`, { headers: { authorization: key } });
    await r.body.dump();
    return r.statusCode;
  };
  /** A request whose client leaves after `ms` (the socket is destroyed, no answer read). */
  const abandoned = (key: string, path: string, ms: number): Promise<void> =>
    new Promise((done) => {
      const u = new URL(`${gw.gateway}/t${path}`);
      const req = httpRequest({
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        headers: { authorization: key },
        agent: false,
      });
      req.on('error', () => done());
      req.on('response', () => done()); // an answer before the abort: the test's assertions say what it was
      req.end();
      setTimeout(() => {
        req.destroy();
        done();
      }, ms);
    });
  const quotaRemaining = async (key: string): Promise<number> => {
    const r = await request(`${gw.admin}/gw/keys/${key}`, { headers: SECRET });
    return ((await r.body.json()) as { quota_remaining: number }).quota_remaining;
  };

  test('a waiting request whose client leaves is dropped: no upstream call, no allowance or quota used, its slot freed', async () => {
    const key = 'throttle-gone-key-0001';
    await addKey(key);
    expect(await get(key, '/first')).toBe(200);
    // two clients wait (the bound is 2) and leave after 300 ms
    await Promise.all([abandoned(key, '/gone-a', 300), abandoned(key, '/gone-b', 300)]);
    await new Promise((r) => setTimeout(r, 300));
    // their slots are free at once: a third request waits (it is not refused at once), then is admitted
    // when the window frees, ~3 s after the first, since the abandoned ones took no allowance
    const t0 = Date.now();
    expect(await get(key, '/waits')).toBe(200);
    expect(Date.now() - t0).toBeGreaterThan(1000);
    await new Promise((r) => setTimeout(r, 4500)); // past the abandoned requests' whole retry span
    expect(paths.filter((p) => p.startsWith('/gone-'))).toEqual([]);
    expect(await quotaRemaining(key)).toBe(8); // /first and /waits only
  }, 30_000);

  test('a waiting request whose key is deleted meanwhile gets 403 and reaches no upstream', async () => {
    const key = 'throttle-deleted-key-0001';
    await addKey(key);
    expect(await get(key, '/first')).toBe(200);
    const waiting = get(key, '/waiting');
    await new Promise((r) => setTimeout(r, 300));
    const del = await request(`${gw.admin}/gw/keys/${key}`, { method: 'DELETE', headers: SECRET });
    expect(del.statusCode).toBe(200);
    await del.body.dump();
    expect(await waiting).toBe(403);
    expect(paths).not.toContain('/waiting');
  }, 30_000);
});
