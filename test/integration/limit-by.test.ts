/**
 * Limits per client address or request header (docs/contract.md#limit-by) through real `gw` processes, real HTTP from
 * distinct loopback source addresses (127.0.0.2, 127.0.0.3…: the client socket is bound to them) and real
 * Redis:
 *   one standalone gateway: two clients of a `limit_by: ip` API each get the whole allowance; a client
 *   behind a trusted proxy is told apart by X-Forwarded-For; a forged X-Forwarded-For from an untrusted
 *   peer changes nothing; the 429 is the API-level one with the caller's own headers; `header:X-Tenant`
 *   gives each tenant its own allowance and a missing header shares the empty value's; the access log
 *   carries the client address; an HTTP/2 client is told apart by its connection's address, its h2c and
 *   HTTP/1.1 requests counted together; metrics carry no address or header value;
 *   three standalone gateways on one Redis with the sliding log: exact per client;
 *   three standalone gateways on one Redis with the DRL: each client within the DRL's bounds;
 *   a `gw sidecar` whose compiled config comes from the ConfigMap and options from --config.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect as h2connect } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freshRedis, redisUrl } from '../helpers/redis.js';
import { maxInAnySpan } from '../helpers/drl-traffic.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { freshNamespace } from '../helpers/kube.js';
import { eventually, startSidecar, writeConfigMap, type Sidecar } from '../helpers/sidecar.js';
import { ApiDefinitionResource } from '../../crds/kinds.js';
import { compileConfig } from '../../compiler/compile-config.js';

/** One client: an undici Agent whose sockets leave from `address` (undici's own option: `connect.localAddress` is overridden). */
const agents = new Map<string, Agent>();
function from(address: string): Agent {
  let a = agents.get(address);
  if (!a) agents.set(address, (a = new Agent({ localAddress: address })));
  return a;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function get(url: string, address: string, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await request(url, { dispatcher: from(address), headers });
  return { status: r.statusCode, headers: r.headers, body: await r.body.text() };
}

async function statuses(url: string, address: string, n: number, headers: Record<string, string> = {}) {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await get(url, address, headers)).status);
  return out;
}

const ok = (xs: number[]): number => xs.filter((s) => s === 200).length;

const MANIFESTS = `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: byip}
spec:
  use_keyless: true
  proxy: {listen_path: /byip/, target_url: UPSTREAM}
  global_rate_limit: {rate: 3, per: 60, limit_by: ip}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: tenants}
spec:
  use_keyless: true
  proxy: {listen_path: /tenants/, target_url: UPSTREAM}
  global_rate_limit: {rate: 100, per: 60}
  use_extended_paths: true
  extended_paths:
    rate_limit:
      - {path: /search, method: GET, rate: 2, per: 60, limit_by: 'header:X-Tenant'}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: oas}
spec:
  use_keyless: true
  oas:
    openapi: 3.0.3
    paths: {/login: {get: {operationId: login}}}
    x-gw-api-gateway:
      server: {listenPath: {value: /oas/}}
      upstream: {url: UPSTREAM}
      middleware: {operations: {login: {rateLimit: {enabled: true, rate: 2, per: 60s, limit_by: ip}}}}
`;

let up: Server;
let upstream: string;

beforeAll(async () => {
  up = createServer((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
  upstream = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
});
afterAll(async () => {
  await Promise.all([...agents.values()].map((a) => a.close()));
  up.closeAllConnections();
  up.close();
});

function resources(text = MANIFESTS): string {
  const dir = tempDir('gw-limitby-');
  writeFileSync(join(dir, 'apis.yaml'), text.replaceAll('UPSTREAM', upstream));
  return dir;
}

function configFile(text: string): string {
  const f = join(tempDir('gw-limitby-cfg-'), 'config.yaml');
  writeFileSync(f, text);
  return f;
}

describe('one gateway (memory)', () => {
  let gw: Standalone;
  beforeAll(async () => {
    const cfg = configFile('trusted_proxies: [127.0.0.4, "::1/128"]\naccess_logs: {enabled: true}\n');
    gw = await startStandalone(resources(), ['--config', cfg]);
  });
  afterAll(async () => {
    await gw?.stop();
    cleanup(gw.dir);
  });

  test('two clients of a limit_by: ip API each get the whole allowance; the 429 describes their own', async () => {
    const url = `${gw.gateway}/byip/x`;
    expect(await statuses(url, '127.0.0.2', 3)).toEqual([200, 200, 200]);
    const refused = await get(url, '127.0.0.2');
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toEqual({ error: 'API Rate Limit Exceeded' });
    expect(refused.headers['x-ratelimit-limit']).toBe('3');
    expect(refused.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // another address: its own allowance, and its headers count its own requests
    const first = await get(url, '127.0.0.3');
    expect([first.status, first.headers['x-ratelimit-remaining']]).toEqual([200, '2']);
    expect(await statuses(url, '127.0.0.3', 3)).toEqual([200, 200, 429]);
  });

  test('an HTTP/2 client is told apart by the address of its connection, its h2c and HTTP/1.1 requests counted together', async () => {
    const url = `${gw.gateway}/byip/x`;
    const { port } = new URL(gw.gateway);
    const s = h2connect(gw.gateway, {
      createConnection: () => netConnect({ host: '127.0.0.1', port: Number(port), localAddress: '127.0.0.6' }),
    });
    try {
      const h2status = (): Promise<number> =>
        new Promise((resolve, reject) => {
          const st = s.request({ ':path': '/byip/x' });
          st.on('response', (h) => resolve(Number(h[':status'])));
          st.on('error', reject);
          st.resume();
        });
      expect([await h2status(), await h2status()]).toEqual([200, 200]);
      // the same address over HTTP/1.1: the third of its allowance, then refused on both protocols
      expect(await statuses(url, '127.0.0.6', 2)).toEqual([200, 429]);
      expect(await h2status()).toBe(429);
      // another address over HTTP/1.1 still has its whole allowance
      expect(await statuses(url, '127.0.0.7', 1)).toEqual([200]);
    } finally {
      s.close();
    }
  });

  test('a forged X-Forwarded-For from an untrusted peer changes nothing', async () => {
    const url = `${gw.gateway}/byip/x`;
    const forged = [];
    for (let i = 0; i < 5; i++)
      forged.push((await get(url, '127.0.0.5', { 'x-forwarded-for': `198.51.100.${i}` })).status);
    expect(forged).toEqual([200, 200, 200, 429, 429]);
    expect((await get(url, '127.0.0.5')).status).toBe(429);
  });

  test('behind a trusted proxy each client is told apart by X-Forwarded-For (its rightmost untrusted entry)', async () => {
    const url = `${gw.gateway}/byip/x`;
    const via = (xff: string): Promise<number[]> => statuses(url, '127.0.0.4', 4, { 'x-forwarded-for': xff });
    expect(await via('203.0.113.1')).toEqual([200, 200, 200, 429]);
    expect(await via('203.0.113.2')).toEqual([200, 200, 200, 429]);
    // entries left of the client's are the client's own claims: they change nothing
    expect(await via('1.1.1.1, 203.0.113.1')).toEqual([429, 429, 429, 429]);
    // a chain of trusted proxies is walked: 127.0.0.4 forwarded what 127.0.0.4 (trusted) was sent by 203.0.113.3
    expect(await via('203.0.113.3, 127.0.0.4')).toEqual([200, 200, 200, 429]);
    // an IPv4-mapped address is the IPv4 address; IPv6 clients share their /64
    expect(await via('::ffff:203.0.113.3')).toEqual([429, 429, 429, 429]);
    expect(await statuses(url, '127.0.0.4', 2, { 'x-forwarded-for': '[2001:db8:1:2::a]:443' })).toEqual([200, 200]);
    expect(await statuses(url, '127.0.0.4', 2, { 'x-forwarded-for': '2001:db8:1:2:ffff::b' })).toEqual([200, 429]);
    expect(await statuses(url, '127.0.0.4', 1, { 'x-forwarded-for': '2001:db8:1:3::a' })).toEqual([200]);
    // the proxy's own requests (no header): the proxy's allowance
    expect(await statuses(url, '127.0.0.4', 4)).toEqual([200, 200, 200, 429]);
  });

  test('OAS operation rateLimit with limit_by: ip', async () => {
    const url = `${gw.gateway}/oas/login`;
    expect(await statuses(url, '127.0.0.6', 3)).toEqual([200, 200, 429]);
    expect(await statuses(url, '127.0.0.7', 3)).toEqual([200, 200, 429]);
  });

  test('header:X-Tenant: one allowance per tenant; a missing or empty header shares one', async () => {
    const url = `${gw.gateway}/tenants/search`;
    const t = (tenant: string | undefined, n: number, address = '127.0.0.2') =>
      statuses(url, address, n, tenant === undefined ? {} : { 'x-tenant': tenant });
    expect(await t('acme', 3)).toEqual([200, 200, 429]);
    expect(await t('acme', 1, '127.0.0.3')).toEqual([429]); // the tenant's, whatever its address
    expect(await t('globex', 3)).toEqual([200, 200, 429]);
    expect(await t('ACME', 2)).toEqual([200, 200]); // values are case-sensitive
    expect(await t(undefined, 1)).toEqual([200]);
    expect(await t('', 1, '127.0.0.3')).toEqual([200]);
    expect(await t(undefined, 1, '127.0.0.5')).toEqual([429]);
    // the rest of the API is not per tenant
    expect(await statuses(`${gw.gateway}/tenants/other`, '127.0.0.2', 3)).toEqual([200, 200, 200]);
  });

  test('metrics keep their labels (no address, no header value); the access log has the client address', async () => {
    const m = await (await request(`${gw.admin}/metrics`)).body.text();
    for (const s of ['127.0.0.2', '203.0.113', 'acme', 'globex', '2001:db8']) expect(m).not.toContain(s);
    expect(m).toMatch(/gw_rate_limited_total\{api="byip",scope="api"\} \d+/);
    expect(m).toMatch(/^gw_client_buckets [1-9]\d*$/m);
    const lines = (): { client_ip: string }[] =>
      gw
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"access"'))
        .map((l) => JSON.parse(l) as { client_ip: string });
    // the access log's writes are asynchronous
    await eventually(async () => lines().some((l) => l.client_ip === '203.0.113.2'), 5000, 'access lines');
    expect(lines().some((l) => l.client_ip === '203.0.113.2')).toBe(true); // behind the trusted proxy
    expect(lines().some((l) => l.client_ip === '127.0.0.5')).toBe(true); // its forged header ignored
    expect(lines().some((l) => l.client_ip === '198.51.100.0')).toBe(false);
  });
});

/** Three standalone gateways sharing the run's Redis, with `config`. */
async function threeGateways(config: string, manifests: string): Promise<Standalone[]> {
  const redis = await freshRedis();
  redis.disconnect();
  const cfg = configFile(config);
  // one after the other: three node processes starting at once on a loaded machine may miss the helper's deadline
  const gws: Standalone[] = [];
  for (let i = 0; i < 3; i++)
    gws.push(await startStandalone(resources(manifests), ['--config', cfg, '--redis', redisUrl()]));
  return gws;
}

const SHARED = (rate: number, per: number, by: string, name = 'shared', path = '/s/') => `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}}
spec:
  use_keyless: true
  proxy: {listen_path: ${path}, target_url: UPSTREAM}
  global_rate_limit: {rate: ${rate}, per: ${per}, limit_by: '${by}'}
`;

describe('three gateways, Redis sliding log: exact per client', () => {
  let gws: Standalone[] = [];
  beforeAll(async () => {
    const apis = `${SHARED(10, 60, 'ip')}---\n${SHARED(5, 60, 'header:X-Tenant', 'tenants', '/t/')}`;
    gws = await threeGateways('enable_kv_rolling_limiter: true\n', apis);
  });
  afterAll(async () => {
    await Promise.all(gws.map(async (g) => (await g.stop(), cleanup(g.dir))));
  });

  test('limit_by ip: each address exactly the allowance, concurrent requests spread over the gateways', async () => {
    const burst = async (address: string): Promise<number[]> =>
      Promise.all(
        Array.from({ length: 30 }, (_, i) => get(`${gws[i % 3]!.gateway}/s/x`, address).then((a) => a.status)),
      );
    const [a, b] = await Promise.all([burst('127.0.0.2'), burst('127.0.0.3')]);
    expect([ok(a), ok(b)]).toEqual([10, 10]);
    expect(a.filter((s) => s !== 200).every((s) => s === 429)).toBe(true);
    expect(ok(await burst('127.0.0.4'))).toBe(10);
    expect(ok(await burst('127.0.0.2'))).toBe(0);
  });

  test('header:X-Tenant: each tenant exactly its allowance over every gateway; no header = the empty value', async () => {
    const burst = (headers: Record<string, string>): Promise<number[]> =>
      Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          get(`${gws[i % 3]!.gateway}/t/x`, `127.0.0.${2 + (i % 3)}`, headers).then((a) => a.status),
        ),
      );
    const [acme, globex, none] = await Promise.all([
      burst({ 'x-tenant': 'acme' }),
      burst({ 'x-tenant': 'globex' }),
      burst({}),
    ]);
    expect([ok(acme), ok(globex), ok(none)]).toEqual([5, 5, 5]);
    expect(ok(await burst({ 'x-tenant': '' }))).toBe(0);
  });
});

describe('three gateways, DRL (store for peers only)', () => {
  // 60 per 2 s = 30/s > drl_threshold 1 × 3 gateways: the DRL counts it
  const RATE = 60;
  const PER = 2;
  let gws: Standalone[] = [];
  beforeAll(async () => {
    gws = await threeGateways('drl_threshold: 1\ndrl_notification_frequency: 0.5\n', SHARED(RATE, PER, 'ip'));
    // every gateway sees the other two (heartbeats)
    await new Promise((r) => setTimeout(r, 1500));
  });
  afterAll(async () => {
    await Promise.all(gws.map(async (g) => (await g.stop(), cleanup(g.dir))));
  });

  test('two clients over three gateways: each within the bounds of its own allowance', async () => {
    // each client sends ~2× the rate, evenly over the gateways, for 3 windows; admissions timed on arrival
    const admitted: Record<string, number[]> = { '127.0.0.2': [], '127.0.0.3': [] };
    const sent: Record<string, number[]> = { '127.0.0.2': [], '127.0.0.3': [] };
    const start = Date.now();
    const end = start + 3 * PER * 1000;
    const client = async (address: string): Promise<void> => {
      let i = 0;
      while (Date.now() < end) {
        const tick = Date.now();
        for (let k = 0; k < 12; k++) sent[address]!.push(tick - start);
        const batch = await Promise.all(
          Array.from({ length: 12 }, () => get(`${gws[i++ % 3]!.gateway}/s/x`, address).then((a) => a.status)),
        );
        for (const s of batch) if (s === 200) admitted[address]!.push(Date.now() - start);
        await new Promise((r) => setTimeout(r, Math.max(0, 100 - (Date.now() - tick))));
      }
    };
    await Promise.all(Object.keys(admitted).map(client));
    for (const [address, times] of Object.entries(admitted)) {
      // upper bound (docs/contract.md#drl-bounds): at most 1.1 × 3 × rate in any span of 3 × per, from the first request
      const most = maxInAnySpan(times, 3 * PER * 1000);
      expect({ address, most, ok: most <= Math.floor(1.1 * 3 * RATE) }).toMatchObject({ ok: true });
      // lower bound: after convergence each client gets its own allowance, not a share of one bucket (which
      // gives ~half): ≥ 0.75 × rate per window, held while the client offered at least the rate (a loaded
      // machine may send less than it meant to). docs/contract.md#drl-bounds's own 0.9 × lower bound is held by drl-shapes,
      // whose shapes run alone; here two clients, three gateways and the test's clients share two cores.
      const inSteady = (t: number): boolean => t >= PER * 1000 && t < 3 * PER * 1000;
      const steady = times.filter(inSteady).length;
      const offered = sent[address]!.filter(inSteady).length;
      if (offered < RATE * 2) console.warn(`${address}: offered ${offered} < the rate: lower bound not checked`);
      else expect({ address, steady, offered, ok: steady >= 0.75 * RATE * 2 }).toMatchObject({ ok: true });
    }
  });
});

describe('gw sidecar: limit_by from the ConfigMap, trusted_proxies from --config', () => {
  let ns: string;
  let sidecar: Sidecar;
  beforeAll(async () => {
    ns = await freshNamespace('limitby');
    const def = ApiDefinitionResource.parse({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'ApiDefinition',
      metadata: { name: 'byip', namespace: ns },
      spec: {
        use_keyless: true,
        proxy: { listen_path: '/byip/' },
        global_rate_limit: { rate: 2, per: 60, limit_by: 'ip' },
      },
    });
    await writeConfigMap(ns, JSON.stringify(compileConfig([def], []).config));
    sidecar = await startSidecar({
      ns,
      upstream,
      redis: redisUrl(),
      options: 'enable_kv_rolling_limiter: true\ntrusted_proxies: [127.0.0.4/32]\n',
    });
  });
  afterAll(async () => {
    await sidecar?.stop();
  });

  test('each address its own allowance; the trusted proxy forwards clients apart', async () => {
    const url = `${sidecar.gw}/byip/x`;
    expect(await statuses(url, '127.0.0.2', 3)).toEqual([200, 200, 429]);
    expect(await statuses(url, '127.0.0.3', 3, { 'x-forwarded-for': '127.0.0.2' })).toEqual([200, 200, 429]);
    expect(await statuses(url, '127.0.0.4', 3, { 'x-forwarded-for': '192.0.2.1' })).toEqual([200, 200, 429]);
    expect(await statuses(url, '127.0.0.4', 1, { 'x-forwarded-for': '127.0.0.2' })).toEqual([429]);
  });
});
