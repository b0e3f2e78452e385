/**
 * kv_failure_mode through the real gateway process (`gw standalone --redis`) while its Redis is stopped:
 *   closed → 503 {"error":"Rate limiter unavailable"} with Retry-After, counted in
 *            gw_rate_limiter_unavailable_total{api} — never a 429, never gw_rate_limited_total;
 *   open   → every request with a known key is served.
 * Either way /readyz stays 200 (a store outage must not empty a Service), and the limits are enforced
 * again soon after the store returns.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { startNode, stopNode, type Node } from '../harness/redis-cluster.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { eventually } from '../helpers/sidecar.js';

const KEY = 'failure-mode-key-0001';

async function call(url: string, key = KEY): Promise<{ status: number; body: string; retryAfter?: string }> {
  const r = await request(url, { headers: { authorization: key } });
  const retry = r.headers['retry-after'];
  return { status: r.statusCode, body: await r.body.text(), retryAfter: typeof retry === 'string' ? retry : undefined };
}

const metricValue = (text: string, name: string): number =>
  text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);

describe.each(['closed', 'open'] as const)('kv_failure_mode %s with the store stopped', (mode) => {
  let node: Node;
  let gw: Standalone;
  let dir: string;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  beforeAll(async () => {
    node = await startNode();
    echo = await startEcho();
    dir = tempDir();
    writeFileSync(
      join(dir, 'api.yaml'),
      [
        // an API limit of 3 per 60 s: the store-backed sliding log counts it
        `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: fm}\nspec:\n  proxy: {listen_path: /fm/, target_url: '${echo.url}'}\n  global_rate_limit: {rate: 3, per: 60}`,
        `apiVersion: v1\nkind: Secret\nmetadata: {name: fm}\nstringData: {key: ${KEY}}`,
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: fm}\nspec: {secretRef: {name: fm}, rate: 1000, per: 1}`,
      ].join('\n---\n'),
    );
    const cfg = join(tempDir('gw-cfg-'), 'config.yaml');
    writeFileSync(cfg, `enable_kv_rolling_limiter: true\nkv_failure_mode: ${mode}\n`);
    gw = await startStandalone(dir, ['--redis', `redis://127.0.0.1:${node.port}`, '--config', cfg]);
  }, 30_000);
  afterAll(async () => {
    await gw?.stop();
    echo?.server.close();
    if (node) await stopNode(node);
    if (dir) cleanup(dir);
  });

  test('the probe paths answer GET/HEAD only (405 otherwise), on the admin and the gateway listener', async () => {
    for (const base of [gw.admin, gw.gateway])
      for (const path of ['/healthz', '/readyz']) {
        const r = await request(`${base}${path}`, { method: 'POST', body: '' });
        await r.body.dump();
        expect(r.statusCode).toBe(405);
        expect(r.headers.allow).toBe('GET, HEAD');
        expect((await request(`${base}${path}`, { method: 'HEAD' })).statusCode).toBe(200);
      }
  });

  test('the answer while the store is down, readiness kept, limits back once it returns', async () => {
    expect((await call(`${gw.gateway}/fm/x`)).status).toBe(200);
    await stopNode(node, true);
    await eventually(
      async () => ((await (await request(`${gw.admin}/healthz`)).body.json()) as { store: string }).store === 'down',
      5000,
      'store down',
    );
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await call(`${gw.gateway}/fm/x`));
    expect((await request(`${gw.admin}/readyz`)).statusCode).toBe(200);
    expect((await request(`${gw.gateway}/readyz`)).statusCode).toBe(200);
    const metrics = await (await request(`${gw.admin}/metrics`)).body.text();
    if (mode === 'closed') {
      for (const a of answers) {
        expect(a.status).toBe(503);
        expect(JSON.parse(a.body)).toEqual({ error: 'Rate limiter unavailable' });
        expect(a.retryAfter).toBe('1');
      }
      expect(metricValue(metrics, 'gw_rate_limiter_unavailable_total{api="fm"}')).toBe(6);
    } else {
      // more than the limit of 3, all served: nothing can count them
      expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
      expect(metricValue(metrics, 'gw_rate_limiter_unavailable_total')).toBe(0);
    }
    expect(metricValue(metrics, 'gw_rate_limited_total')).toBe(0);
    expect(answers.some((a) => a.status === 429)).toBe(false);

    node = await startNode([], node.port, node.dir); // back, empty
    const back = Date.now();
    await eventually(
      async () => ((await (await request(`${gw.admin}/healthz`)).body.json()) as { store: string }).store === 'up',
      10_000,
      'store up again',
    );
    expect(Date.now() - back).toBeLessThan(3000); // reconnect backoff capped at 500 ms; slack for a loaded machine
    const after = [];
    for (let i = 0; i < 4; i++) after.push((await call(`${gw.gateway}/fm/x`)).status);
    // the store came back empty: 3 per 60 s counted afresh, the fourth is limited
    expect(after).toEqual([200, 200, 200, 429]);
  }, 40_000);
});
