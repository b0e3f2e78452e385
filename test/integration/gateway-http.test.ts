/**
 * The gateway as an HTTP/1.1 reverse proxy, at the edges clients and upstreams reach: Expect:
 * 100-continue, hop-by-hop headers, the absolute-form request target, failures in the log, and many
 * long-lived responses at once (no connection cap holding the others).
 */
import { writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { freePort } from '../harness/ports.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';

type Echoed = { method: string; path: string; headers: Record<string, string>; body: string };

/** One raw HTTP/1.1 exchange over a fresh socket; resolves with everything the server sent before closing. */
function raw(base: string, text: string): Promise<string> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => s.write(text));
    let got = '';
    s.on('data', (c: Buffer) => (got += c.toString('latin1')));
    s.on('end', () => resolve(got));
    s.on('error', reject);
    s.setTimeout(5000, () => s.destroy(new Error(`no end; got ${JSON.stringify(got)}`)));
  });
}

/** A raw client socket and what it has received so far. */
async function openSocket(
  base: string,
): Promise<{ s: Socket; got: () => string; waitFor: (re: RegExp) => Promise<string> }> {
  const u = new URL(base);
  const s = connect(Number(u.port), u.hostname);
  await new Promise<void>((r, j) => s.once('connect', r).once('error', j));
  let got = '';
  s.on('data', (c: Buffer) => (got += c.toString('latin1')));
  s.on('error', () => undefined);
  const waitFor = async (re: RegExp): Promise<string> => {
    for (let i = 0; i < 100; i++) {
      if (re.test(got)) return got;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`no ${String(re)} in ${JSON.stringify(got)}`);
  };
  return { s, got: () => got, waitFor };
}

const handshake = (path: string, extra = ''): string =>
  `GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`;

describe('gateway: HTTP proxying edges', () => {
  let echo: { server: Server; url: string };
  let ws: Server;
  let hold: Server;
  let odd: Server;
  const held: (() => void)[] = [];
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    echo = await startEcho();
    // answers its headers at once and its body only when released: a long-lived response (SSE, long poll)
    hold = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('open\n');
      held.push(() => res.end('done\n'));
    });
    hold.keepAliveTimeout = 100;
    // a WebSocket-style upstream: 101 then an echo of every byte; /refuse declines the upgrade
    ws = createServer((_req, res) => res.end('plain'));
    ws.on('upgrade', (req: IncomingMessage, socket: Socket) => {
      socket.on('error', () => undefined); // node's own listener is gone once upgraded; a reset would be uncaught
      if (req.url?.includes('refuse'))
        return void socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno');
      // a Latin-1 byte in a header, and a length a 101 must not carry
      socket.write(
        Buffer.from(
          `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nX-Seen-Key: ${String(req.headers['sec-websocket-key'])}\r\nX-RateLimit-Limit: 999\r\nX-Cafe: caf\u00e9\r\nContent-Length: 5\r\n\r\n`,
          'latin1',
        ),
      );
      socket.pipe(socket);
    });
    await new Promise<void>((r) => ws.listen(0, '127.0.0.1', r));
    const wsUrl = `http://127.0.0.1:${(ws.address() as { port: number }).port}`;
    await new Promise<void>((r) => hold.listen(0, '127.0.0.1', r));
    const holdUrl = `http://127.0.0.1:${(hold.address() as { port: number }).port}`;
    // answers with its own reason phrase, or a 204 that wrongly carries a length
    odd = createServer((req, res) => {
      if (req.url === '/nc') {
        res.writeHead(204, { 'content-length': '5' });
        return void res.end();
      }
      res.writeHead(req.url === '/made' ? 201 : 599, req.url === '/made' ? 'Made It' : 'Network Connect Timeout', {
        'content-length': '2',
      });
      res.end('ok');
    });
    await new Promise<void>((r) => odd.listen(0, '127.0.0.1', r));
    const oddUrl = `http://127.0.0.1:${(odd.address() as { port: number }).port}`;
    dir = tempDir();
    writeFileSync(
      join(dir, 'apis.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: e}
spec:
  use_keyless: true
  proxy: {listen_path: /e/, target_url: ${echo.url}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: hold}
spec:
  use_keyless: true
  proxy: {listen_path: /hold/, target_url: ${holdUrl}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ws}
spec:
  proxy: {listen_path: /ws/, target_url: ${wsUrl}}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: wskey}
spec: {key_hash: ${sha256hex('ws-key-0001')}, rate: 2, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: odd}
spec:
  use_keyless: true
  proxy: {listen_path: /odd/, target_url: ${oddUrl}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: down}
spec:
  use_keyless: true
  proxy: {listen_path: /down/, target_url: http://127.0.0.1:${await freePort()}}
`,
    );
    gw = await startStandalone(dir);
  });
  afterAll(async () => {
    for (const release of held.splice(0)) release();
    await gw?.stop();
    echo?.server.close();
    ws?.closeAllConnections();
    ws?.close();
    hold?.closeAllConnections();
    hold?.close();
    odd?.closeAllConnections();
    odd?.close();
    cleanup(dir);
  });

  test('Expect: 100-continue: the client gets 100 Continue, the upstream gets the request and its body (it used to be a 502)', async () => {
    const u = new URL(gw.gateway);
    const body = 'x'.repeat(64 * 1024);
    const got = await new Promise<{ status: number; continued: boolean; echoed: Echoed }>((resolve, reject) => {
      const req = httpRequest({
        host: u.hostname,
        port: u.port,
        path: '/e/upload',
        method: 'PUT',
        headers: { expect: '100-continue', 'content-length': body.length },
      });
      let continued = false;
      req.on('continue', () => {
        continued = true;
        req.end(body);
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, continued, echoed: JSON.parse(text) as Echoed }));
      });
      req.on('error', reject);
    });
    expect(got.status).toBe(200);
    expect(got.continued).toBe(true);
    expect(got.echoed.body).toHaveLength(body.length);
    expect(got.echoed.headers.expect).toBeUndefined(); // answered here, not passed on
  });

  test('an h2c offer or an upgrade offer with a body is an ordinary request: the body reaches the upstream (it was lost, then 504)', async () => {
    const h2c = await raw(
      gw.gateway,
      'POST /e/h2c HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello=world',
    );
    expect(h2c).toMatch(/^HTTP\/1\.1 200 /);
    const echoed = JSON.parse(
      h2c.slice(h2c.indexOf('\r\n\r\n') + 4).replace(/^[0-9a-f]+\r\n|\r\n0\r\n\r\n$/g, ''),
    ) as Echoed;
    expect(echoed.body).toBe('hello=world');
    expect(echoed.headers.upgrade).toBeUndefined();
    expect(echoed.headers['http2-settings']).toBeUndefined();
    const foo = await raw(
      gw.gateway,
      'POST /e/foo HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, close\r\nUpgrade: foo\r\nContent-Length: 5\r\n\r\nabcde',
    );
    expect(foo).toMatch(/^HTTP\/1\.1 200 /);
    expect(foo).toContain('abcde');
  });

  test("the upstream's reason phrase is relayed; a 204 loses a Content-Length it should not carry", async () => {
    expect(await raw(gw.gateway, 'GET /odd/made HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 201 Made It\r\n/,
    );
    expect(await raw(gw.gateway, 'GET /odd/x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 599 Network Connect Timeout\r\n/,
    );
    const nc = await raw(gw.gateway, 'GET /odd/nc HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    expect(nc).toMatch(/^HTTP\/1\.1 204 /);
    expect(nc.toLowerCase()).not.toContain('content-length');
  });

  test('HTTP/1.1 without Host → 400 JSON (node answered with an empty body); HTTP/1.0 without it is served; two Host → 400; TRACE → 405', async () => {
    const noHost = await raw(gw.gateway, 'GET /e/x HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(noHost).toMatch(/^HTTP\/1\.1 400 /);
    expect(noHost).toContain('{"error":"Host header missing"}');
    expect(await raw(gw.gateway, 'GET /e/x HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    // two Host fields (RFC 9112 §3.2): 400, in HTTP/1.1 and 1.0, whatever their case
    for (const req of [
      'GET /e/x HTTP/1.1\r\nHost: gw\r\nHost: other\r\nConnection: close\r\n\r\n',
      'GET /e/x HTTP/1.0\r\nhost: gw\r\nHOST: gw\r\n\r\n',
    ]) {
      const twoHosts = await raw(gw.gateway, req);
      expect(twoHosts).toMatch(/^HTTP\/1\.1 400 /);
      expect(twoHosts).toContain('{"error":"more than one Host header"}');
    }
    const trace = await raw(
      gw.gateway,
      'TRACE /e/x HTTP/1.1\r\nHost: gw\r\nCookie: secret=1\r\nConnection: close\r\n\r\n',
    );
    expect(trace).toMatch(/^HTTP\/1\.1 405 /);
    expect(trace).not.toContain('secret=1');
  });

  test('Proxy-Connection is hop-by-hop: not forwarded', async () => {
    const r = await request(`${gw.gateway}/e/x`, {
      headers: { 'proxy-connection': 'keep-alive', 'x-end-to-end': '1' },
    });
    const echoed = (await r.body.json()) as Echoed;
    expect(echoed.headers['proxy-connection']).toBeUndefined();
    expect(echoed.headers['x-end-to-end']).toBe('1');
  });

  test('an absolute-form request target is routed by its path (RFC 9112 §3.2.2), the query kept', async () => {
    const answer = await raw(
      gw.gateway,
      'GET http://elsewhere.example/e/abs?q=1 HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('"path":"/abs?q=1"');
    const root = await raw(
      gw.gateway,
      'GET http://elsewhere.example HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n',
    );
    expect(root).toMatch(/^HTTP\/1\.1 404 /); // `/`: no API there
  });

  test('WebSocket: after the key checks and limits the handshake reaches the upstream, its 101 comes back, and bytes flow both ways', async () => {
    const c = await openSocket(gw.gateway);
    c.s.write(handshake('/ws/chat', 'Authorization: ws-key-0001\r\n'));
    const head = await c.waitFor(/\r\n\r\n/);
    expect(head).toMatch(/^HTTP\/1\.1 101 /);
    expect(head).toMatch(/\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=\r\n/i);
    expect(head).toMatch(/\r\nx-seen-key: dGhlIHNhbXBsZSBub25jZQ==\r\n/i); // Sec-WebSocket-Key reached the upstream
    expect(head).toMatch(/\r\nx-ratelimit-limit: 2\r\n/i); // ours, not the upstream's 999
    expect(head).toContain('\r\nx-cafe: caf\u00e9\r\n'); // the byte 0xE9 as sent, not re-encoded as UTF-8
    expect(head).not.toMatch(/content-length/i);
    c.s.write('ping-1');
    await c.waitFor(/ping-1$/);
    c.s.write('ping-2');
    await c.waitFor(/ping-1ping-2$/);
    c.s.destroy();
  });

  test('WebSocket: the handshake is a request like any other: 401 without a key, 429 over the key limit; an upstream refusal is relayed', async () => {
    const noKey = await openSocket(gw.gateway);
    noKey.s.write(handshake('/ws/chat'));
    expect(await noKey.waitFor(/Authorization field missing/)).toMatch(/^HTTP\/1\.1 401 /);
    // the key allows 2 per 60 and the previous test used one: one more, then 429
    const refused = await openSocket(gw.gateway);
    refused.s.write(handshake('/ws/refuse', 'Authorization: ws-key-0001\r\n'));
    expect(await refused.waitFor(/\r\n\r\nno/)).toMatch(/^HTTP\/1\.1 403 /);
    const limited = await openSocket(gw.gateway);
    limited.s.write(handshake('/ws/chat', 'Authorization: ws-key-0001\r\n'));
    expect(await limited.waitFor(/Rate Limit Exceeded/)).toMatch(/^HTTP\/1\.1 429 [^]*retry-after: \d+/i);
    for (const c of [noKey, refused, limited]) c.s.destroy();
  });

  test('an upstream failure is logged with its cause (at most a line a second), not only counted', async () => {
    expect((await request(`${gw.gateway}/down/x`)).statusCode).toBe(502);
    const logged = (): string | undefined =>
      gw
        .output()
        .split('\n')
        .find((l) => l.includes('upstream call failed'));
    for (let i = 0; i < 40 && !logged(); i++) await new Promise((r) => setTimeout(r, 50)); // the log is written asynchronously
    const line = logged();
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ api: 'down', status: 502, code: 'ECONNREFUSED' });
  });

  test('200 long-lived responses at once do not hold a short request back (no 128-connection cap on the upstream pool)', async () => {
    const agent = new Agent({ connections: 250 });
    try {
      const open = await Promise.all(
        Array.from({ length: 200 }, async () => {
          const r = await request(`${gw.gateway}/hold/stream`, { dispatcher: agent });
          return r;
        }),
      );
      expect(open.map((r) => r.statusCode)).toEqual(Array(200).fill(200));
      // every stream is open and waiting; a short request on the same upstream answers at once
      const t = Date.now();
      const quick = await request(`${gw.gateway}/hold/quick`, { dispatcher: agent, headersTimeout: 5000 });
      expect(quick.statusCode).toBe(200);
      expect(Date.now() - t).toBeLessThan(2000);
      for (const release of held.splice(0)) release();
      await Promise.all([...open, quick].map((r) => r.body.text()));
    } finally {
      await agent.close();
    }
  }, 30_000);
});
