/**
 * The scope examples of docs/contract.md#request-path through HTTP, against `gw standalone` and a real upstream:
 * key global 15/60 over three APIs = 15; per-API allowances independent; classic per-endpoint rules
 * (regex, array order); OAS per-endpoint with {id} wildcards; two policies 90/30 + 100/10 → 100/10;
 * a custom rate-limit key shared by two keys; X-RateLimit-* in `rate_limits` and `quotas` modes.
 * drl_threshold is raised so every limit is counted by the exact in-memory sliding log.
 */
import type { Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { sha256hex } from '../../lib/hash.js';
import { startEcho } from '../../scripts/echo-upstream.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';

const keyed = (name: string, path: string, upstream: string, extra = ''): string => `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}}
spec:
  proxy: {listen_path: ${path}, target_url: '${upstream}'}
${extra}---
`;
const key = (name: string, raw: string, spec: string): string => `apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: ${name}}
spec:
  key_hash: ${sha256hex(raw)}
${spec}
---
`;

async function hit(
  url: string,
  auth?: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const r = await request(url, { headers: auth ? { authorization: auth } : {} });
  return { status: r.statusCode, headers: r.headers, body: await r.body.text() };
}
async function statuses(urls: string[], auth?: string): Promise<number[]> {
  const out: number[] = [];
  for (const u of urls) out.push((await hit(u, auth)).status);
  return out;
}
const count = (xs: number[], x: number): number => xs.filter((y) => y === x).length;

describe('scope examples through HTTP', () => {
  let echo: { server: Server; url: string };
  let gw: Standalone;
  let quotasGw: Standalone;
  let dir: string;
  let qdir: string;
  let cfg: string;

  beforeAll(async () => {
    echo = await startEcho();
    const u = echo.url;
    dir = tempDir();
    cfg = tempDir('gw-cfg-');
    writeFileSync(
      join(dir, 'apis.yaml'),
      keyed('g1', '/g1/', u) +
        keyed('g2', '/g2/', u) +
        keyed('g3', '/g3/', u) +
        keyed(
          'cl',
          '/cl/',
          u,
          `  use_keyless: true
  use_extended_paths: true
  extended_paths:
    rate_limit:
      - {path: '/items/[0-9]+', method: GET, enabled: true, rate: 1, per: 60}
      - {path: '/items/.*', method: GET, enabled: true, rate: 3, per: 60}
`,
        ) +
        `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: catalog}
spec:
  oas:
    openapi: 3.0.3
    info: {title: Catalog, version: 1.0.0}
    paths:
      /items/{id}:
        get: {operationId: getItem}
    x-gw-api-gateway:
      info: {id: catalog, name: Catalog, state: {active: true}}
      server: {listenPath: {value: /cat/, strip: true}, authentication: {enabled: false}}
      upstream: {url: '${u}', rateLimit: {enabled: true, rate: 50, per: 60s}}
      middleware:
        operations:
          getItem: {rateLimit: {enabled: true, rate: 2, per: 60s}}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: bronze}
spec: {name: Bronze, rate: 90, per: 30, access_rights: {g1: {api_id: g1}}}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: silver}
spec: {name: Silver, rate: 100, per: 10, access_rights: {g1: {api_id: g1}}}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: team}
spec: {name: Team, rate: 3, per: 60, meta_data: {rate_limit_pattern: '$gw_meta.team|shared'}, access_rights: {g2: {api_id: g2}}}
`,
    );
    writeFileSync(
      join(dir, 'keys.yaml'),
      key('k15', 'key-15', '  rate: 15\n  per: 60') +
        key(
          'perapi',
          'key-perapi',
          '  rate: 1000\n  per: 60\n  access_rights:\n    g1: {api_id: g1, limit: {rate: 2, per: 60}}\n    g2: {api_id: g2, limit: {rate: 3, per: 60}}',
        ) +
        key('two', 'key-two', '  apply_policies: [bronze, silver]') +
        key('reda', 'key-red-a', '  apply_policies: [team]\n  meta_data: {team: red}') +
        key('redb', 'key-red-b', '  apply_policies: [team]\n  meta_data: {team: red}') +
        key('blue', 'key-blue', '  apply_policies: [team]\n  meta_data: {team: blue}'),
    );
    writeFileSync(join(cfg, 'gw.yaml'), 'drl_threshold: 100000\n');
    gw = await startStandalone(dir, ['--config', join(cfg, 'gw.yaml')]);

    qdir = tempDir();
    writeFileSync(
      join(qdir, 'a.yaml'),
      keyed('q', '/q/', u) +
        keyed('qa', '/qa/', u, '  global_rate_limit: {rate: 1, per: 60}\n') +
        key('quota', 'key-quota', '  rate: 100\n  per: 60\n  quota_max: 5\n  quota_renewal_rate: 3600') +
        key('quotarate', 'key-quota-rate', '  rate: 2\n  per: 60\n  quota_max: 10\n  quota_renewal_rate: 3600'),
    );
    writeFileSync(join(cfg, 'quotas.yaml'), 'drl_threshold: 100000\nrate_limit_response_headers: quotas\n');
    quotasGw = await startStandalone(qdir, ['--config', join(cfg, 'quotas.yaml')]);
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await quotasGw?.stop();
    echo?.server.close();
    for (const d of [dir, qdir, cfg]) if (d) cleanup(d);
  });

  test('key global 15 per 60 over three APIs = 15 in total', async () => {
    const urls = Array.from({ length: 30 }, (_, i) => `${gw.gateway}/g${(i % 3) + 1}/x`);
    const s = await statuses(urls, 'key-15');
    expect(count(s, 200)).toBe(15);
    expect(s.slice(15).every((x) => x === 429)).toBe(true);
  });

  test('per-API allowances are independent', async () => {
    expect(await statuses(Array(4).fill(`${gw.gateway}/g1/x`), 'Bearer key-perapi')).toEqual([200, 200, 429, 429]);
    expect(await statuses(Array(4).fill(`${gw.gateway}/g2/x`), 'Bearer key-perapi')).toEqual([200, 200, 200, 429]);
  });

  test('classic per-endpoint rules: regex paths, the first match in array order wins', async () => {
    expect(await statuses(Array(2).fill(`${gw.gateway}/cl/items/5`))).toEqual([200, 429]); // rule 1 (1/60)
    expect(await statuses(Array(4).fill(`${gw.gateway}/cl/items/abc`))).toEqual([200, 200, 200, 429]); // rule 2 (3/60)
    const r = await hit(`${gw.gateway}/cl/items/5`);
    expect(JSON.parse(r.body)).toEqual({ error: 'API Rate Limit Exceeded' });
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  test('OAS per-endpoint: {id} matches any id, the operation limit is shared by all of them; other paths use the API limit', async () => {
    expect(
      await statuses([`${gw.gateway}/cat/items/1`, `${gw.gateway}/cat/items/2`, `${gw.gateway}/cat/items/3`]),
    ).toEqual([200, 200, 429]);
    expect(await statuses(Array(3).fill(`${gw.gateway}/cat/other`))).toEqual([200, 200, 200]);
  });

  test('two policies 90/30 + 100/10 behave as 100/10', async () => {
    const s: number[] = [];
    let last;
    for (let i = 0; i < 101; i++) {
      last = await hit(`${gw.gateway}/g1/x`, 'key-two');
      s.push(last.status);
    }
    expect(count(s, 200)).toBe(100);
    expect(s[100]).toBe(429);
    expect(last!.headers['x-ratelimit-limit']).toBe('100');
    expect(Number(last!.headers['retry-after'])).toBeLessThanOrEqual(10); // a 10 s window, never the 30 s one
    expect(JSON.parse(last!.body)).toEqual({ error: 'Rate Limit Exceeded' });
  });

  test('a custom rate-limit key shared by two keys; a third key with another value has its own', async () => {
    const s = [
      ...(await statuses(Array(2).fill(`${gw.gateway}/g2/x`), 'key-red-a')),
      ...(await statuses(Array(2).fill(`${gw.gateway}/g2/x`), 'key-red-b')),
    ];
    expect(s).toEqual([200, 200, 200, 429]);
    expect(await statuses(Array(3).fill(`${gw.gateway}/g2/x`), 'key-blue')).toEqual([200, 200, 200]);
  });

  test('headers: rate_limits mode carries the limit; quotas mode carries quota_max, remaining and renewal', async () => {
    const r = await hit(`${gw.gateway}/g3/x`, 'key-perapi'); // no g3 rights: access_rights non-empty → 403
    expect(r.status).toBe(403);
    const ok = await hit(`${gw.gateway}/g1/y`, 'key-15');
    expect(ok.status === 200 || ok.status === 429).toBe(true);
    expect(ok.headers['x-ratelimit-limit']).toBe('15');
    const t = Math.floor(Date.now() / 1000);
    const q1 = await hit(`${quotasGw.gateway}/q/x`, 'key-quota');
    expect(q1.status).toBe(200);
    expect(q1.headers['x-ratelimit-limit']).toBe('5');
    expect(q1.headers['x-ratelimit-remaining']).toBe('4');
    expect(Number(q1.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(t + 3599);
    expect(Number(q1.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(t + 3602);
    const rest = await statuses(Array(5).fill(`${quotasGw.gateway}/q/x`), 'key-quota');
    expect(rest).toEqual([200, 200, 200, 200, 403]);
    const over = await hit(`${quotasGw.gateway}/q/x`, 'key-quota');
    expect(JSON.parse(over.body)).toEqual({ error: 'Quota exceeded' });
    expect(over.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(3500);
  });

  test('quotas mode: a 429 (key or API level) carries the quota too, unconsumed', async () => {
    const t = Math.floor(Date.now() / 1000);
    const quota = (
      r: Awaited<ReturnType<typeof hit>>,
    ): [string | string[] | undefined, string | string[] | undefined] => [
      r.headers['x-ratelimit-limit'],
      r.headers['x-ratelimit-remaining'],
    ];
    expect(quota(await hit(`${quotasGw.gateway}/q/x`, 'key-quota-rate'))).toEqual(['10', '9']);
    expect(quota(await hit(`${quotasGw.gateway}/q/x`, 'key-quota-rate'))).toEqual(['10', '8']);
    const keyLimited = await hit(`${quotasGw.gateway}/q/x`, 'key-quota-rate');
    expect(keyLimited.status).toBe(429);
    expect(JSON.parse(keyLimited.body)).toEqual({ error: 'Rate Limit Exceeded' });
    expect(quota(keyLimited)).toEqual(['10', '8']); // the refused request consumed no quota
    expect(Number(keyLimited.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(t + 3599);
    expect(Number(keyLimited.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(t + 3602);
    expect(Number(keyLimited.headers['retry-after'])).toBeGreaterThan(0);
    // the API-level limit (1/60) refuses the second request to /qa/ before the key scope
    expect((await hit(`${quotasGw.gateway}/qa/x`, 'key-quota')).status).toBe(403); // key-quota's quota is spent
    const q1 = await hit(`${quotasGw.gateway}/qa/x`, 'key-quota-rate');
    expect(q1.status).toBe(429); // the API's one request went to key-quota
    expect(JSON.parse(q1.body)).toEqual({ error: 'API Rate Limit Exceeded' });
    expect(quota(q1)).toEqual(['10', '8']);
    expect(Number(q1.headers['retry-after'])).toBeGreaterThan(0);
  });
});
