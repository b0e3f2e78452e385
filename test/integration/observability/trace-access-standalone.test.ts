/**
 * docs/contract.md#observability through the real `gw standalone` with span export off: W3C trace context on every path that
 * reaches an upstream (proxying, upgrades, the facade's /api/proxy) and the access log line of each request.
 */
import { writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { join } from 'node:path';
import { request } from 'undici';
import { createEchoServer } from '../../../scripts/echo-upstream.js';
import { sha256hex } from '../../../lib/hash.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const TP = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

async function echoed(url: string, headers: Record<string, string> = {}): Promise<IncomingHttpHeaders> {
  const r = await request(url, { headers });
  expect(r.statusCode).toBe(200);
  return ((await r.body.json()) as { headers: IncomingHttpHeaders }).headers;
}

async function status(url: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(url, { headers });
  await r.body.dump();
  return r.statusCode;
}

describe('trace context and access logs (standalone, span export off)', () => {
  let upstream: Server;
  let upstreamUrl: string;
  let slow: Server;
  let slowUrl: string;
  const upgrades: IncomingHttpHeaders[] = [];
  let gw: Standalone;
  let dir: string;
  let cfg: string;

  beforeAll(async () => {
    upstream = createEchoServer();
    upstream.on('upgrade', (req, socket) => {
      socket.on('error', () => undefined); // node's own listener is gone once upgraded; a reset would be uncaught
      upgrades.push(req.headers);
      socket.end('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: test-proto\r\n\r\n');
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
    // answers after 800 ms (a client may have left by then)
    slow = createServer((req, res) => {
      req.resume();
      setTimeout(() => res.end('late'), 800).unref();
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
    dir = tempDir();
    cfg = tempDir('gw-cfg-');
    writeFileSync(
      join(dir, 'apis.yaml'),
      `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: open}
spec:
  use_keyless: true
  proxy: {listen_path: /open/, target_url: ${upstreamUrl}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: once}
spec:
  use_keyless: true
  proxy: {listen_path: /once/, target_url: ${upstreamUrl}}
  global_rate_limit: {rate: 1, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: slow}
spec:
  use_keyless: true
  proxy: {listen_path: /slow/, target_url: ${slowUrl}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: keyed}
spec:
  proxy: {listen_path: /keyed/, target_url: ${upstreamUrl}}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: two}
spec:
  key_hash: ${sha256hex('raw-key-two-0001')}
  rate: 2
  per: 60
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: quota}
spec:
  key_hash: ${sha256hex('raw-key-quota-0001')}
  quota_max: 1
  quota_renewal_rate: 3600
`,
    );
    writeFileSync(join(cfg, 'gw.yaml'), 'access_logs: {enabled: true}\n');
    gw = await startStandalone(dir, ['--config', join(cfg, 'gw.yaml')]);
  });
  afterAll(async () => {
    await gw?.stop();
    upstream?.closeAllConnections();
    upstream?.close();
    slow?.closeAllConnections();
    slow?.close();
    cleanup(dir);
    cleanup(cfg);
  });

  test('a request with a traceparent: the upstream sees the same trace id, a new parent id, the flags and tracestate', async () => {
    for (const flags of ['01', '00']) {
      const h = await echoed(`${gw.gateway}/open/a`, {
        traceparent: `00-${TRACE}-${PARENT}-${flags}`,
        tracestate: 'vendor=abc,other=1',
      });
      const m = TP.exec(String(h.traceparent));
      expect(m).not.toBeNull();
      expect(m![1]).toBe(TRACE);
      expect(m![2]).not.toBe(PARENT);
      expect(m![3]).toBe(flags);
      expect(h.tracestate).toBe('vendor=abc,other=1');
    }
  });

  test('without a traceparent (or with a malformed one) a new trace starts; its tracestate is dropped', async () => {
    const ids = new Set<string>();
    const sends: Record<string, string>[] = [
      {},
      { traceparent: `ff-${TRACE}-${PARENT}-01`, tracestate: 'vendor=abc' },
      { traceparent: `00-${'0'.repeat(32)}-${PARENT}-01` },
      { traceparent: `00-${TRACE}-${'0'.repeat(16)}-01` },
      { traceparent: 'nonsense' },
    ];
    for (const sent of sends) {
      const h = await echoed(`${gw.gateway}/open/b`, sent);
      const m = TP.exec(String(h.traceparent));
      expect(m).not.toBeNull();
      expect(m![1]).not.toBe(TRACE);
      expect(h.tracestate).toBeUndefined();
      ids.add(m![1]!);
    }
    expect(ids.size).toBe(5);
  });

  test('an upgrade carries the trace context to the upstream', async () => {
    const res = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${gw.gateway}/open/ws`, {
        headers: { connection: 'upgrade', upgrade: 'test-proto', traceparent: `00-${TRACE}-${PARENT}-01` },
      });
      req.on('upgrade', (r, socket) => {
        socket.destroy();
        resolve(r.statusCode ?? 0);
      });
      req.on('response', (r) => resolve(r.statusCode ?? 0));
      req.on('error', reject);
      req.end();
    });
    expect(res).toBe(101);
    const m = TP.exec(String(upgrades.at(-1)?.traceparent));
    expect(m?.[1]).toBe(TRACE);
    expect(m?.[2]).not.toBe(PARENT);
  });

  test("POST /api/proxy continues the proxied request's trace (else the caller's)", async () => {
    const viaProxy = async (headers: Record<string, string>, body: Record<string, unknown>) => {
      const r = await request(`${gw.admin}/api/proxy`, {
        method: 'POST',
        headers: { authorization: 'Bearer test-token', 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ method: 'GET', url: `${gw.gateway}/open/p`, ...body }),
      });
      const out = (await r.body.json()) as { status_code: number; body: { headers: IncomingHttpHeaders } };
      expect(out.status_code).toBe(200);
      return TP.exec(String(out.body.headers.traceparent));
    };
    const own = await viaProxy({}, { headers: { traceparent: `00-${TRACE}-${PARENT}-01` } });
    expect(own?.[1]).toBe(TRACE);
    expect(own?.[2]).not.toBe(PARENT);
    const caller = await viaProxy({ traceparent: `00-${TRACE}-${PARENT}-01` }, {});
    expect(caller?.[1]).toBe(TRACE);
    const fresh = await viaProxy({}, {});
    expect(fresh?.[1]).toMatch(/^[0-9a-f]{32}$/);
    expect(fresh?.[1]).not.toBe(TRACE);
  });

  test('one access line per request with every field; no query string, no raw key', async () => {
    const tp = `00-${TRACE}-${PARENT}-01`;
    expect(
      await status(`${gw.gateway}/keyed/x?api_key=SECRETQUERY&b=2`, {
        authorization: 'raw-key-two-0001',
        traceparent: tp,
      }),
    ).toBe(200);
    expect(await status(`${gw.gateway}/keyed/x`, { authorization: 'raw-key-two-0001' })).toBe(200);
    expect(await status(`${gw.gateway}/keyed/x`, { authorization: 'raw-key-two-0001' })).toBe(429);
    expect(await status(`${gw.gateway}/keyed/x`)).toBe(401);
    expect(await status(`${gw.gateway}/keyed/x`, { authorization: 'raw-key-unknown-0001' })).toBe(403);
    expect(await status(`${gw.gateway}/keyed/q`, { authorization: 'raw-key-quota-0001' })).toBe(200);
    expect(await status(`${gw.gateway}/keyed/q`, { authorization: 'raw-key-quota-0001' })).toBe(403);
    expect(await status(`${gw.gateway}/once/1`)).toBe(200);
    expect(await status(`${gw.gateway}/once/1`)).toBe(429);
    expect(await status(`${gw.gateway}/nowhere`)).toBe(404);

    const lines = async (): Promise<Record<string, unknown>[]> =>
      gw
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"access"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        // the lines of this test (the other tests' use /open/)
        .filter((l) => !String(l.path).startsWith('/open/'));
    const end = Date.now() + 10_000;
    while ((await lines()).length < 10 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    const got = await lines();
    expect(got).toHaveLength(10);
    for (const l of got) {
      for (const f of [
        'api_id',
        'method',
        'path',
        'status',
        'latency_ms',
        'upstream_latency_ms',
        'decision',
        'key',
        'trace_id',
        'client_ip',
      ])
        expect(l).toHaveProperty(f);
      expect(l.method).toBe('GET');
      expect(l.latency_ms).toEqual(expect.any(Number));
      expect(l.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(l.client_ip).toMatch(/127\.0\.0\.1/);
    }
    const two = sha256hex('raw-key-two-0001').slice(0, 8);
    const quota = sha256hex('raw-key-quota-0001').slice(0, 8);
    expect(got.map((l) => [l.api_id, l.path, l.status, l.decision, l.key])).toEqual([
      ['keyed', '/keyed/x', 200, 'allow', two],
      ['keyed', '/keyed/x', 200, 'allow', two],
      ['keyed', '/keyed/x', 429, 'key_limited', two],
      ['keyed', '/keyed/x', 401, 'auth', null],
      ['keyed', '/keyed/x', 403, 'auth', sha256hex('raw-key-unknown-0001').slice(0, 8)],
      ['keyed', '/keyed/q', 200, 'allow', quota],
      ['keyed', '/keyed/q', 403, 'quota', quota],
      ['once', '/once/1', 200, 'allow', null],
      ['once', '/once/1', 429, 'api_limited', null],
      ['', '/nowhere', 404, 'allow', null],
    ]);
    expect(got[0]!.trace_id).toBe(TRACE);
    expect(got[0]!.upstream_latency_ms).toEqual(expect.any(Number));
    expect(got[2]!.upstream_latency_ms).toBeNull();
    const out = gw.output();
    expect(out).not.toContain('SECRETQUERY');
    expect(out).not.toContain('raw-key-two-0001');
    expect(out).not.toContain('raw-key-quota-0001');
  });

  test('a client that leaves before a slow upstream answers: the gateway keeps serving; its access line says 499, with its address', async () => {
    // it used to crash the process: the line read the client address from a socket that was gone
    const gone = await request(`${gw.gateway}/slow/gone`, { signal: AbortSignal.timeout(150) }).catch(
      (e: unknown) => e,
    );
    expect((gone as { name?: string }).name).toMatch(/TimeoutError|AbortError/);
    const post = await request(`${gw.gateway}/open/after`, { method: 'POST', body: 'a=1' });
    await post.body.dump();
    expect(post.statusCode).toBe(200);
    await new Promise((r) => setTimeout(r, 1200)); // the slow upstream has answered meanwhile
    expect(gw.proc.exitCode).toBeNull();
    expect(await status(`${gw.gateway}/open/still`)).toBe(200);
    const line = gw
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"access"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.path === '/slow/gone');
    expect(line).toMatchObject({ api_id: 'slow', status: 499, decision: 'allow' });
    expect(line?.client_ip).toMatch(/127\.0\.0\.1/);
  });
});
