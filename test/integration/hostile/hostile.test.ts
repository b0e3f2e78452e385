/**
 * Hostile input against the real `gw standalone` (docs/contract.md#hostile-input, #gateway-configuration strict_paths): slow heads on every
 * listener, more slow connections than the caps, a backtracking-prone pattern, path forms upstreams read
 * differently, a conflicting manifest, the health endpoints' methods, an unauthenticated 100 MB upload,
 * an abandoned upload and credential guessing from many addresses. Timeouts and caps are shortened through
 * the config file, so the suite takes seconds. Every answer is counted: no 5xx, and the processes never exit.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { eventually } from '../../helpers/sidecar.js';
import { keptClient, slowHead, type SlowHead } from '../../helpers/slow-client.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

const PER_CLIENT = 10;
const MAX_CONNECTIONS = 40;

const CONFIG = `
headers_timeout: 1
max_connections: ${MAX_CONNECTIONS}
max_connections_per_client: ${PER_CLIENT}
facade_rate_limit: {rate: 10, per: 1}
`;

const manifests = (upstream: string): string => `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: redos}
spec:
  use_keyless: true
  proxy: {listen_path: /redos/, target_url: ${upstream}/redos-upstream}
  use_extended_paths: true
  extended_paths:
    rate_limit:
      - {path: '/docs/([a-z0-9]+-?)+/view', method: GET, rate: 1000, per: 1}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: users}
spec:
  use_keyless: true
  proxy: {listen_path: /api/, target_url: ${upstream}/users-upstream}
  use_extended_paths: true
  extended_paths:
    rate_limit:
      - {path: /users, method: GET, rate: 1, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: files}
spec:
  proxy: {listen_path: /files/, target_url: ${upstream}/files-upstream}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: files-key}
spec:
  key_hash: ${sha('files-secret-key')}
  access_rights:
    files:
      allowed_urls: [{url: '/public/.*', methods: [GET]}]
`;

function sha(s: string): string {
  return process.getBuiltinModule('node:crypto').createHash('sha256').update(s).digest('hex');
}

interface Answer {
  status: number;
  body: string;
}

/** Every answer any test got: none may be a 5xx. */
const answers: { what: string; status: number }[] = [];

/** One request on its own connection (from `localAddress` when given), without normalising the path. */
function send(
  base: string,
  path: string,
  o: { method?: string; headers?: Record<string, string>; localAddress?: string; body?: string } = {},
): Promise<Answer> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: o.method ?? 'GET',
        headers: o.headers,
        agent: false,
        ...(o.localAddress ? { localAddress: o.localAddress } : {}),
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => {
          answers.push({ what: `${o.method ?? 'GET'} ${base}${path}`, status: res.statusCode ?? 0 });
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`${path}: no answer in 10 s`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

let echo: { server: Server; url: string };
let dir: string;
let strictDir: string;
let gw: Standalone;
let strict: Standalone;

beforeAll(async () => {
  echo = await startEcho();
  dir = tempDir();
  strictDir = tempDir();
  for (const d of [dir, strictDir]) writeFileSync(join(d, 'apis.yaml'), manifests(echo.url));
  const config = join(dir, '..', `hostile-${process.pid}.yaml`);
  writeFileSync(config, CONFIG);
  const strictConfig = join(strictDir, '..', `hostile-strict-${process.pid}.yaml`);
  writeFileSync(strictConfig, `${CONFIG}strict_paths: true\n`);
  [gw, strict] = await Promise.all([
    startStandalone(dir, ['--config', config], { GW_LOG_LEVEL: 'info' }),
    startStandalone(strictDir, ['--config', strictConfig]),
  ]);
}, 30_000);

afterAll(async () => {
  const codes = await Promise.all([gw?.stop(), strict?.stop()]);
  echo?.server.close();
  for (const d of [dir, strictDir]) if (d) cleanup(d);
  expect(codes).toEqual([0, 0]);
});

test('a pattern that backtracks in V8 (nested quantifiers) answers at once, on a 32-character and a 10 kB path', async () => {
  for (const n of [32, 10_000]) {
    const t0 = performance.now();
    const r = await send(gw.gateway, `/redos/docs/${'a'.repeat(n)}!`);
    expect(r.status).toBe(200); // no rule matches: the upstream answers
    expect(performance.now() - t0).toBeLessThan(2000); // sanity bound: V8's engine took seconds at 32
  }
  expect((await send(gw.gateway, '/redos/docs/abc-def/view')).status).toBe(200);
});

test('slow request heads are cut on the gateway and the admin listener (headers_timeout: 1 s → 408 and close)', async () => {
  const heads = [slowHead(gw.gateway, '127.0.0.1', 300, '/redos/x'), slowHead(gw.admin, '127.0.0.1', 300, '/redos/x')];
  const t0 = Date.now();
  const got = await Promise.race([
    Promise.all(heads.map((h) => h.closed)),
    new Promise<never>((_r, rej) => setTimeout(() => rej(new Error('slow heads not cut within 10 s')), 10_000)),
  ]);
  expect(Date.now() - t0).toBeLessThan(10_000);
  for (const g of got) expect(g).toMatch(/^HTTP\/1\.1 408/);
});

test('2× the per-client cap of slow connections from one address: the rest are closed at once; another client is served, /healthz answers', async () => {
  const held = Array.from({ length: 2 * PER_CLIENT }, () => slowHead(gw.gateway, '127.0.0.2', 200, '/redos/x'));
  // the connections past the cap are closed as soon as accepted, with nothing written back
  const early: string[] = [];
  await eventually(
    async () => {
      early.length = 0;
      for (const h of held) if (h.socket.destroyed) early.push('closed');
      return early.length >= PER_CLIENT;
    },
    5000,
    'connections past the per-client cap closed',
  );
  expect(early.length).toBeLessThanOrEqual(PER_CLIENT + 1); // the cap's own are still open (until cut at 1 s)
  expect((await send(gw.gateway, '/redos/ok', { localAddress: '127.0.0.3' })).status).toBe(200);
  expect((await send(gw.gateway, '/healthz', { localAddress: '127.0.0.3' })).status).toBe(200);
  expect((await send(gw.admin, '/healthz')).status).toBe(200);
  await Promise.all(held.map((h) => h.closed)); // and the held ones are cut by the head timeout
});

test('2× max_connections of slow connections from many addresses: an open keep-alive client is still served; new ones again once the slow ones are cut', async () => {
  // a client connected before the flood, keeping its connection
  const keep = await keptClient(gw.gateway, '127.0.0.4');
  const ask = (): Promise<string> => keep.ask('/redos/keep');
  expect(await ask()).toMatch(/^HTTP\/1\.1 200/);
  const held: SlowHead[] = [];
  for (let a = 10; a < 10 + (2 * MAX_CONNECTIONS) / PER_CLIENT; a++)
    for (let i = 0; i < PER_CLIENT; i++) held.push(slowHead(gw.gateway, `127.0.0.${a}`, 200, '/redos/x'));
  await eventually(async () => held.filter((h) => h.socket.destroyed).length >= MAX_CONNECTIONS - 1, 5000, 'cap');
  const keptAnswer = await ask();
  expect(keptAnswer).toMatch(/^HTTP\/1\.1 200/);
  await Promise.all(held.map((h) => h.closed)); // cut by the head timeout
  expect((await send(gw.gateway, '/redos/after', { localAddress: '127.0.0.5' })).status).toBe(200);
  keep.close();
});

test('an unauthenticated upload to the facade is refused before its body is read: 401, and the connection closes instead of draining 100 MB', async () => {
  const u = new URL(gw.admin);
  const socket = connect({ host: u.hostname, port: Number(u.port) });
  await new Promise((r) => socket.once('connect', r));
  let got = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (got += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  socket.write(
    'POST /gw/keys/abc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n',
  );
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let sent = 0;
  const pump = setInterval(() => {
    for (let i = 0; i < 16 && !socket.destroyed; i++) {
      socket.write(chunk);
      sent += chunk.length;
    }
  }, 10);
  await Promise.race([closed, new Promise((r) => setTimeout(r, 10_000))]);
  clearInterval(pump);
  expect(socket.destroyed || socket.readableEnded).toBe(true);
  expect(got).toMatch(/^HTTP\/1\.1 401/);
  expect(sent).toBeLessThan(50 * 1024 * 1024);
});

test('an abandoned authenticated upload to the facade: no error line, no 500 path', async () => {
  const u = new URL(gw.admin);
  const socket = connect({ host: u.hostname, port: Number(u.port) });
  await new Promise((r) => socket.once('connect', r));
  socket.on('error', () => undefined);
  socket.write(
    'POST /gw/keys/abandoned HTTP/1.1\r\nHost: x\r\nX-Gw-Authorization: test-secret\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"rate": 1',
  );
  await new Promise((r) => setTimeout(r, 200));
  socket.destroy();
  await new Promise((r) => setTimeout(r, 500));
  expect((await send(gw.admin, '/healthz')).status).toBe(200);
  const errors = gw
    .output()
    .split('\n')
    .filter((l) => l.includes('"level":50') || l.includes('facade request failed'));
  expect(errors).toEqual([]);
});

test('credential guessing from 30 addresses: the global guess budget holds them to about rate + one guess per address', async () => {
  // the 30 addresses at once, each guessing one after the other (within the admin listener's connection
  // caps, which follow max_connections: 40 here)
  const perAddress = async (a: number): Promise<Answer[]> => {
    const out: Answer[] = [];
    for (let i = 0; i < 8; i++)
      out.push(
        await send(gw.admin, '/gw/keys/x', {
          headers: { 'x-gw-authorization': `wrong-${a}-${i}` },
          localAddress: `127.0.1.${a + 1}`,
        }),
      );
    return out;
  };
  const got = (await Promise.all(Array.from({ length: 30 }, (_, a) => perAddress(a)))).flat();
  const compared = got.filter((r) => r.status === 403).length;
  const refused = got.filter((r) => r.status === 429).length;
  expect(compared + refused).toBe(240);
  // 240 guesses without the global budget (8 per address, under the per-address limit of 10/s); with it
  // at most rate (10) per second plus each address's first guess, over the few seconds this takes
  expect(compared).toBeLessThanOrEqual(120);
  expect(refused).toBeGreaterThan(0);
});

test('/healthz, /readyz and /metrics answer GET and HEAD only (405 otherwise) on the gateway and the admin listener', async () => {
  for (const [base, path] of [
    [gw.gateway, '/healthz'],
    [gw.gateway, '/readyz'],
    [gw.admin, '/healthz'],
    [gw.admin, '/readyz'],
    [gw.admin, '/metrics'],
  ] as const) {
    expect((await send(base, path)).status).toBe(200);
    expect((await send(base, path, { method: 'HEAD' })).status).toBe(200);
    for (const method of ['POST', 'DELETE', 'PUT']) expect((await send(base, path, { method })).status).toBe(405);
  }
});

describe('path forms that upstreams read differently', () => {
  const KEY = { authorization: 'files-secret-key' };
  const EVASIONS = [
    '/files/public/..;/admin/secret',
    '/files/public/..\\admin/secret',
    '/files/public/..%5cadmin/secret',
    '/files/public/..%2fadmin/secret',
    '/files/public/..%2Fadmin/secret',
    '/files/public/x%00',
  ];

  test('strict_paths: each evasion of allowed_urls is 400, the allowed path is served', async () => {
    expect((await send(strict.gateway, '/files/public/doc', { headers: KEY })).status).toBe(200);
    expect((await send(strict.gateway, '/files/admin/secret', { headers: KEY })).status).toBe(403);
    for (const p of EVASIONS) expect([p, (await send(strict.gateway, p, { headers: KEY })).status]).toEqual([p, 400]);
  });

  test('strict_paths: a GET /users rule at 429 is not passed by /Users, /users;x, /users%2F, /users%00 or HEAD', async () => {
    expect((await send(strict.gateway, '/api/users')).status).toBe(200);
    expect((await send(strict.gateway, '/api/users')).status).toBe(429);
    expect((await send(strict.gateway, '/api/Users')).status).toBe(429);
    expect((await send(strict.gateway, '/api/USERS/')).status).toBe(429);
    expect((await send(strict.gateway, '/api/users', { method: 'HEAD' })).status).toBe(429);
    for (const p of ['/api/users;x', '/api/users%2F', '/api/users%2f', '/api/users%00', '/api/users%5C'])
      expect([p, (await send(strict.gateway, p)).status]).toEqual([p, 400]);
  });

  test('default mode (documented in docs/proxy.md): `;` and encoded separators are forwarded as sent; case and HEAD are distinct rules', async () => {
    // ".." with ";" is not a dot segment to the gateway: allowed_urls sees /public/..;/admin/secret
    const r = await send(gw.gateway, '/files/public/..;/admin/secret', { headers: KEY });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).path).toBe('/files-upstream/public/..;/admin/secret');
    expect((await send(gw.gateway, '/api/users')).status).toBe(200);
    expect((await send(gw.gateway, '/api/users')).status).toBe(429);
    expect((await send(gw.gateway, '/api/Users')).status).toBe(200);
    expect((await send(gw.gateway, '/api/users', { method: 'HEAD' })).status).toBe(200);
  });
});

test('a newly added manifest claiming a served listen path (and api_id) is refused naming both; the served API keeps serving', async () => {
  writeFileSync(
    join(dir, '00-dup.yaml'),
    `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: aaa-dup}
spec:
  use_keyless: true
  api_id: redos
  proxy: {listen_path: /redos/, target_url: ${echo.url}/dup-upstream}
`,
  );
  await eventually(
    async () => gw.output().includes('aaa-dup') && gw.output().includes('conflicts with'),
    10_000,
    'the conflict line',
  );
  const line = gw
    .output()
    .split('\n')
    .find((l) => l.includes('aaa-dup') && l.includes('conflicts with'))!;
  expect(line).toMatch(/redos/);
  const r = await send(gw.gateway, '/redos/still');
  expect(r.status).toBe(200);
  expect(JSON.parse(r.body).path).toBe('/redos-upstream/still');
});

test('no answer was a 5xx and neither process exited', () => {
  expect(answers.length).toBeGreaterThan(50);
  expect(answers.filter((a) => a.status >= 500)).toEqual([]);
  expect(gw.proc.exitCode).toBeNull();
  expect(strict.proc.exitCode).toBeNull();
});
