/**
 * The gateway listener over TLS and HTTP/2 (docs/proxy.md, "TLS and HTTP/2"), on the real `gw standalone`:
 * HTTP/1.1 and h2 over TLS (ALPN), h2c with prior knowledge on a plain listener, one key's limit counted
 * across protocols, client certificates checked against client_ca_file, a certificate replaced on disk
 * served to new connections without a restart.
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect as h2connect, createSecureServer, type Http2SecureServer } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { Agent, request } from 'undici';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { sha256hex } from '../../../lib/hash.js';
import { gatewayCerts, issue, makeCa, servedFingerprint, type Issued } from '../../helpers/certs.js';
import { h2get } from '../../helpers/h2.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

const KEY = 'tls-key-000001';
const BOUND = 'tls-key-bound01';
const resources = (echoUrl: string, extra = ''): string => `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: e}
spec:
  proxy: {listen_path: /e/, target_url: ${echoUrl}}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: k}
spec: {key_hash: ${sha256hex(KEY)}, rate: 4, per: 60}
${extra}`;

describe('gateway listener: TLS, HTTP/2, h2c', () => {
  let echo: { server: Server; url: string };
  let privateUpstream: HttpsServer;
  let h2Upstream: Http2SecureServer;
  let certs: string;
  let ca: Issued;
  let gwCert: Issued;
  let tlsGw: Standalone;
  let plainGw: Standalone;
  let noH2cGw: Standalone;
  let dirs: string[] = [];
  const port = (g: Standalone): number => Number(new URL(g.gateway).port);

  beforeAll(async () => {
    echo = await startEcho();
    ({ dir: certs, ca, gw: gwCert } = gatewayCerts());
    makeCa(certs, 'other');
    issue(certs, 'other', 'stranger', 'client-x');
    // the served files: copies, replaced by the rotation test
    mkdirSync(join(certs, 'served'));
    copyFileSync(gwCert.cert, join(certs, 'served/tls.crt'));
    copyFileSync(gwCert.key, join(certs, 'served/tls.key'));
    const conf = join(certs, 'gw.yaml');
    writeFileSync(
      conf,
      `tls: {cert_file: ${join(certs, 'served/tls.crt')}, key_file: ${join(certs, 'served/tls.key')}, client_ca_file: ${ca.cert}}\naccess_logs: {enabled: true}\n`,
    );
    const client = issue(certs, 'ca', 'client', 'client-1');
    // an upstream with a certificate of the private CA
    const upCert = issue(certs, 'ca', 'upstream', 'upstream.internal', 'DNS:upstream.internal');
    privateUpstream = createHttpsServer(
      { cert: readFileSync(upCert.cert), key: readFileSync(upCert.key) },
      (req, res) => res.end(`private ${req.url ?? ''}`),
    );
    await new Promise<void>((r) => privateUpstream.listen(0, '127.0.0.1', r));
    const up = `https://127.0.0.1:${(privateUpstream.address() as { port: number }).port}`;
    // one that speaks h2 (and HTTP/1.1): it answers with the protocol the gateway chose
    h2Upstream = createSecureServer(
      { cert: readFileSync(upCert.cert), key: readFileSync(upCert.key), allowHTTP1: true },
      (req, res) => res.end(`${req.httpVersion} ${req.method} ${req.url} ${req.headers['x-up'] ?? ''}`),
    );
    await new Promise<void>((r) => h2Upstream.listen(0, '127.0.0.1', r));
    const h2up = `https://127.0.0.1:${(h2Upstream.address() as { port: number }).port}`;
    // the bound key's fingerprint written as openssl prints it: upper case, colons
    const printed = client.fingerprint.toUpperCase().replace(/(..)(?!$)/g, '$1:');
    const extra = `---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: bound}
spec: {key_hash: ${sha256hex(BOUND)}, rate: 100, per: 60, certificate: "${printed}"}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: private-ca}
spec:
  use_keyless: true
  proxy:
    listen_path: /private/
    target_url: ${up}
    transport: {ssl_ca_cert_file: ${ca.cert}, ssl_server_name: upstream.internal}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: private-h2}
spec:
  use_keyless: true
  proxy:
    listen_path: /private-h2/
    target_url: ${h2up}
    transport: {ssl_ca_cert_file: ${ca.cert}, ssl_server_name: upstream.internal}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: default-trust}
spec:
  use_keyless: true
  proxy: {listen_path: /untrusted/, target_url: ${up}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: untrusted-grpc}
spec:
  use_keyless: true
  proxy: {listen_path: /untrusted-grpc/, target_url: ${h2up}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: insecure}
spec:
  use_keyless: true
  proxy:
    listen_path: /insecure/
    target_url: ${up}
    transport: {ssl_insecure_skip_verify: true}
`;
    const d1 = tempDir();
    const d2 = tempDir();
    const d3 = tempDir();
    dirs = [d1, d2, d3];
    writeFileSync(join(d3, 'r.yaml'), resources(echo.url));
    const noH2c = join(certs, 'no-h2c.yaml');
    writeFileSync(noH2c, 'h2c: true\n');
    writeFileSync(join(d1, 'r.yaml'), resources(echo.url, extra));
    writeFileSync(join(d2, 'r.yaml'), resources(echo.url, extra));
    const logs = join(certs, 'plain.yaml');
    writeFileSync(logs, 'access_logs: {enabled: true}\n');
    [tlsGw, plainGw, noH2cGw] = await Promise.all([
      startStandalone(d1, ['--config', conf]),
      startStandalone(d2, ['--config', logs]),
      // the flag wins over the file's h2c
      startStandalone(d3, ['--config', noH2c, '--h2c', 'false']),
    ]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([tlsGw?.stop(), plainGw?.stop(), noH2cGw?.stop()]);
    await new Promise((r) => echo.server.close(r));
    await new Promise((r) => privateUpstream?.close(r));
    await new Promise((r) => h2Upstream?.close(r));
    for (const d of [...dirs, certs]) cleanup(d);
  });

  const tlsAgent = (): Agent =>
    new Agent({ connect: { ca: readFileSync(ca.cert), servername: 'localhost', ALPNProtocols: ['http/1.1'] } });

  test('HTTP/1.1 over TLS (ALPN http/1.1): proxied, X-Forwarded-Proto https', async () => {
    const agent = tlsAgent();
    const r = await request(`https://127.0.0.1:${port(tlsGw)}/e/one?q=1`, {
      dispatcher: agent,
      headers: { authorization: KEY },
    });
    const body = (await r.body.json()) as { path: string; headers: Record<string, string> };
    expect(r.statusCode).toBe(200);
    expect(body.path).toBe('/one?q=1');
    expect(body.headers['x-forwarded-proto']).toBe('https');
    await agent.close();
  });

  test('h2 over TLS (ALPN h2) and h2c share one key limit with HTTP/1.1; the access log names the protocol', async () => {
    // a fresh gateway's key: 4 per 60 s on the plain one (h2c and HTTP/1.1), counted together
    const s = h2connect(plainGw.gateway);
    const a = await h2get(s, '/e/h2c', { authorization: KEY });
    expect(a.headers[':status']).toBe(200);
    const aBody = JSON.parse(a.body) as { path: string; headers: Record<string, string> };
    expect(aBody.path).toBe('/h2c');
    // the connection's peer and scheme, read from the HTTP/2 session (lib/http/connection.ts)
    expect(aBody.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(aBody.headers['x-forwarded-proto']).toBe('http');
    expect(a.headers['x-ratelimit-remaining']).toBe('3');
    const h1 = await request(`${plainGw.gateway}/e/h1`, { headers: { authorization: KEY } });
    await h1.body.text();
    expect(h1.headers['x-ratelimit-remaining']).toBe('2');
    const b = await h2get(s, '/e/h2c', { authorization: KEY }, 'POST', 'payload');
    expect((JSON.parse(b.body) as { body: string }).body).toBe('payload');
    await h2get(s, '/e/h2c', { authorization: KEY });
    const refused = await h2get(s, '/e/h2c', { authorization: KEY });
    expect(refused.headers[':status']).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    const h1refused = await request(`${plainGw.gateway}/e/h1`, { headers: { authorization: KEY } });
    await h1refused.body.text();
    expect(h1refused.statusCode).toBe(429);
    s.close();
    // h2 over TLS, by ALPN
    const t = h2connect(`https://localhost:${port(tlsGw)}`, { ca: readFileSync(ca.cert) });
    const c = await h2get(t, '/e/tls-h2', { authorization: KEY });
    expect(c.headers[':status']).toBe(200);
    expect((JSON.parse(c.body) as { headers: Record<string, string> }).headers['x-forwarded-proto']).toBe('https');
    t.close();
    // the access log lines carry the protocol
    const deadline = Date.now() + 3000;
    while (!plainGw.output().includes('"protocol":"2"') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(plainGw.output()).toContain('"path":"/e/h2c","status":200');
    expect(plainGw.output()).toMatch(/"path":"\/e\/h2c","status":429[^\n]*"protocol":"2"/);
    // the client address of an HTTP/2 request, read from its session's socket (lib/http/connection.ts)
    expect(plainGw.output()).toMatch(/"path":"\/e\/h2c","status":200[^\n]*"client_ip":"127\.0\.0\.1","protocol":"2"/);
    expect(plainGw.output()).toMatch(/"path":"\/e\/h1","status":200[^\n]*"protocol":"1.1"/);
  });

  test('with client_ca_file: no client certificate is admitted, one of the CA too, one of another CA is refused', async () => {
    const get = async (cert?: string): Promise<number> => {
      const agent = new Agent({
        connect: {
          ca: readFileSync(ca.cert),
          servername: 'localhost',
          ...(cert ? { cert: readFileSync(`${cert}.crt`), key: readFileSync(`${cert}.key`) } : {}),
        },
      });
      try {
        const r = await request(`https://127.0.0.1:${port(tlsGw)}/e/c`, {
          dispatcher: agent,
          headers: { authorization: KEY },
        });
        await r.body.text();
        return r.statusCode;
      } finally {
        await agent.close();
      }
    };
    // the key's limit was spent by the other test or not: either answer means the request got through TLS
    expect([200, 429]).toContain(await get());
    expect([200, 429]).toContain(await get(join(certs, 'client')));
    await expect(get(join(certs, 'stranger'))).rejects.toThrow();
  });

  test('a certificate-bound key: refused without its certificate (403, gRPC-less HTTP/1.1 and h2), admitted with it', async () => {
    const clientCert = { cert: readFileSync(join(certs, 'client.crt')), key: readFileSync(join(certs, 'client.key')) };
    const statusOf = async (base: string, connect: Record<string, unknown>): Promise<number> => {
      const agent = new Agent({ connect: { ca: readFileSync(ca.cert), servername: 'localhost', ...connect } });
      try {
        const r = await request(`${base}/e/bound`, { dispatcher: agent, headers: { authorization: BOUND } });
        await r.body.text();
        return r.statusCode;
      } finally {
        await agent.close();
      }
    };
    const tlsBase = `https://127.0.0.1:${port(tlsGw)}`;
    expect(await statusOf(plainGw.gateway, {})).toBe(403); // not over TLS
    expect(await statusOf(tlsBase, {})).toBe(403); // over TLS, no certificate
    expect(await statusOf(tlsBase, clientCert)).toBe(200);
    // another certificate of the same CA is not that one
    const other = issue(certs, 'ca', 'client2', 'client-2');
    expect(await statusOf(tlsBase, { cert: readFileSync(other.cert), key: readFileSync(other.key) })).toBe(403);
    // h2 over TLS with the certificate
    const s = h2connect(`https://localhost:${port(tlsGw)}`, { ca: readFileSync(ca.cert), ...clientCert });
    expect((await h2get(s, '/e/bound', { authorization: BOUND })).headers[':status']).toBe(200);
    s.close();
    const n = h2connect(`https://localhost:${port(tlsGw)}`, { ca: readFileSync(ca.cert) });
    expect((await h2get(n, '/e/bound', { authorization: BOUND })).headers[':status']).toBe(403);
    n.close();
  });

  test('upstream TLS: a private CA by proxy.transport (SNI name), the default trust refusing it (502, or gRPC UNAVAILABLE; logged per API with the TLS code), verification off by choice (logged once)', async () => {
    const get = async (path: string): Promise<{ status: number; body: string }> => {
      const r = await request(`${plainGw.gateway}${path}`);
      return { status: r.statusCode, body: await r.body.text() };
    };
    expect(await get('/private/a')).toEqual({ status: 200, body: 'private /a' }); // an HTTP/1.1-only upstream
    // an upstream that selects h2 by ALPN is spoken to over HTTP/2, for an HTTP/1.1 client's request too
    const h2 = await request(`${plainGw.gateway}/private-h2/b?q=1`, {
      method: 'POST',
      body: 'x',
      headers: { 'x-up': 'v' },
    });
    expect({ status: h2.statusCode, body: await h2.body.text() }).toEqual({ status: 200, body: '2.0 POST /b?q=1 v' });
    expect((await get('/untrusted/a')).status).toBe(502);
    // a gRPC call to an upstream the default trust refuses, in the same second: UNAVAILABLE, and a line of its
    // own API (failures are logged per API) with node's TLS code, not the code of the stream it cancelled
    const s = h2connect(plainGw.gateway);
    const grpcAnswer = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const st = s.request({ ':method': 'POST', ':path': '/untrusted-grpc/x.Y/Z', 'content-type': 'application/grpc' });
      st.on('response', resolve);
      st.on('error', reject);
      st.end();
      st.resume();
    });
    s.close();
    expect([grpcAnswer[':status'], grpcAnswer['grpc-status']]).toEqual([200, '14']);
    expect(await get('/insecure/a')).toEqual({ status: 200, body: 'private /a' });
    await get('/insecure/b');
    const deadline = Date.now() + 3000;
    while (!plainGw.output().includes('upstream call failed') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(plainGw.output()).toMatch(/"api":"default-trust"[^\n]*"status":502[^\n]*upstream call failed/);
    expect(plainGw.output()).toMatch(
      /"api":"untrusted-grpc"[^\n]*"code":"UNABLE_TO_VERIFY_LEAF_SIGNATURE"[^\n]*upstream call failed/,
    );
    expect(plainGw.output().match(/ssl_insecure_skip_verify: the upstream certificate is not verified/g)).toHaveLength(
      1,
    );
  });

  test("--h2c false (over the file's h2c: true): the HTTP/2 preface is a malformed HTTP/1.1 request (400), HTTP/1.1 served", async () => {
    const got = await new Promise<string>((resolve, reject) => {
      const s = netConnect(port(noH2cGw), '127.0.0.1', () => s.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
      let out = '';
      s.on('data', (c: Buffer) => (out += c.toString('latin1')));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });
    expect(got).toMatch(/^HTTP\/1.1 400/);
    const r = await request(`${noH2cGw.gateway}/e/x`, { headers: { authorization: KEY } });
    await r.body.text();
    expect(r.statusCode).toBe(200);
  });

  test('a plain listener answers HTTP/1.1 on a connection whose first bytes come one at a time', async () => {
    const got = await new Promise<string>((resolve, reject) => {
      const s = netConnect(port(plainGw), '127.0.0.1', () => {
        const text = 'GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n';
        let i = 0;
        const next = (): void => {
          if (i < 3) {
            s.write(text[i++]!);
            setTimeout(next, 30);
          } else s.write(text.slice(3));
        };
        next();
      });
      let out = '';
      s.on('data', (c: Buffer) => (out += c.toString()));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });
    expect(got).toMatch(/^HTTP\/1.1 200/);
  });

  test('a certificate replaced on disk is served to new connections within 10 s, no restart', async () => {
    expect(await servedFingerprint(port(tlsGw), ca.cert)).toBe(gwCert.fingerprint);
    const next = issue(certs, 'ca', 'gw2', 'localhost');
    // as a Secret update lands: both files replaced
    copyFileSync(next.key, join(certs, 'served/tls.key'));
    copyFileSync(next.cert, join(certs, 'served/tls.crt'));
    const t0 = Date.now();
    let fp = '';
    while (Date.now() - t0 < 10_000) {
      fp = await servedFingerprint(port(tlsGw), ca.cert);
      if (fp === next.fingerprint) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(fp).toBe(next.fingerprint);
    expect(tlsGw.proc.exitCode).toBeNull();
  }, 20_000);
});
