/**
 * A client that leaves before its answer (docs/observability.md, the access log's `status`; docs/proxy.md,
 * "Failures"), on the real `gw standalone` with access logs on: its connection closed or its HTTP/2 stream
 * reset while the upstream has not answered is 499 (nginx's "client closed request") in the access log and
 * in gw_requests_total, over HTTP/1.1 (a GET, an upload cut mid-body), HTTP/2 (RST_STREAM, the connection
 * closed) and gRPC (a grpc-js cancel); one that leaves after the answer began keeps the status it was sent.
 */
import * as grpc from '@grpc/grpc-js';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect as h2connect, constants as h2constants, createServer as createH2Server } from 'node:http2';
import type { Http2Server, ServerHttp2Stream } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { apiManifest, cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { bufferMethod, pass } from '../../helpers/grpc.js';

const SERVICE = { Wait: bufferMethod('/test.Deaf/Wait') } satisfies grpc.ServiceDefinition;
const DeafClient = grpc.makeGenericClientConstructor(SERVICE, 'Deaf');

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('a client that leaves before its answer: 499 in the access log and the metrics', () => {
  let slow: Server;
  let deaf: Http2Server;
  let gw: Standalone;
  let dir: string;
  let cfg: string;
  let origin: string;
  let port: number;
  /** Requests the slow upstream has received, by path. */
  const arrived = new Set<string>();

  beforeAll(async () => {
    // answers after 2 s, or (/partial/) sends its head and part of the body at once and the rest later
    slow = createServer((req, res) => {
      arrived.add(req.url ?? '');
      req.resume();
      if (req.url?.startsWith('/partial')) {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('part');
      }
      setTimeout(() => res.end('late'), 2000).unref();
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    const slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
    // a gRPC upstream that never answers
    deaf = createH2Server();
    deaf.on('stream', (s: ServerHttp2Stream) => {
      s.on('error', () => undefined);
      s.resume();
    });
    await new Promise<void>((r) => deaf.listen(0, '127.0.0.1', r));
    dir = tempDir();
    cfg = tempDir('gw-cfg-');
    writeFileSync(
      join(dir, 'r.yaml'),
      [
        apiManifest('slow', `use_keyless: true\nproxy: {listen_path: /slow/, target_url: ${slowUrl}}`),
        apiManifest(
          'partial',
          `use_keyless: true\nproxy: {listen_path: /partial/, strip_listen_path: false, target_url: ${slowUrl}}`,
        ),
        apiManifest(
          'deaf',
          `use_keyless: true\nproxy: {listen_path: /test.Deaf/, strip_listen_path: false, target_url: h2c://127.0.0.1:${(deaf.address() as { port: number }).port}}`,
        ),
      ].join('---\n'),
    );
    writeFileSync(join(cfg, 'gw.yaml'), 'access_logs: {enabled: true}\n');
    gw = await startStandalone(dir, ['--config', join(cfg, 'gw.yaml')]);
    origin = gw.gateway;
    port = Number(new URL(origin).port);
  }, 30_000);

  afterAll(async () => {
    await gw?.stop();
    await new Promise((r) => slow?.close(r));
    await new Promise((r) => deaf?.close(r));
    for (const d of [dir, cfg]) if (d) cleanup(d);
  });

  /** The access line of `path`, waited for (lines are written within 250 ms). */
  async function accessLine(path: string): Promise<Record<string, unknown> | undefined> {
    const t0 = Date.now();
    for (;;) {
      const line = gw
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"access"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.path === path);
      if (line !== undefined || Date.now() - t0 > 3000) return line;
      await sleep(50);
    }
  }

  /** Waits until the slow upstream has the request (the client then leaves while it is being answered). */
  async function reached(path: string): Promise<void> {
    const t0 = Date.now();
    while (!arrived.has(path) && Date.now() - t0 < 3000) await sleep(10);
    expect(arrived.has(path)).toBe(true);
  }

  /** An HTTP/1.1 request written raw on a connection that is destroyed once the upstream has it. */
  async function h1Leave(head: string, path: string): Promise<void> {
    const c = netConnect(port, '127.0.0.1', () => c.write(head));
    c.on('error', () => undefined);
    await reached(path);
    c.destroy();
  }

  const requestsTotal = async (): Promise<string[]> => {
    const r = await request(`${gw.admin}/metrics`);
    return (await r.body.text()).split('\n').filter((l) => l.startsWith('gw_requests_total{'));
  };

  test('HTTP/1.1: a GET whose connection closes, an upload cut mid-body', async () => {
    await h1Leave('GET /slow/h1-get HTTP/1.1\r\nHost: gw\r\n\r\n', '/h1-get');
    await h1Leave('POST /slow/h1-upload HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\nonly-a-part', '/h1-upload');
    for (const path of ['/slow/h1-get', '/slow/h1-upload'])
      expect(await accessLine(path)).toMatchObject({ api_id: 'slow', status: 499, decision: 'allow', protocol: '1.1' });
  });

  test('HTTP/2: a stream reset (RST_STREAM CANCEL), a connection closed', async () => {
    const session = h2connect(origin);
    session.on('error', () => undefined);
    const reset = session.request({ ':path': '/slow/h2-reset' });
    reset.on('error', () => undefined);
    await reached('/h2-reset');
    reset.close(h2constants.NGHTTP2_CANCEL);
    const gone = h2connect(origin);
    gone.on('error', () => undefined);
    gone.request({ ':path': '/slow/h2-conn' }).on('error', () => undefined);
    await reached('/h2-conn');
    gone.destroy();
    for (const path of ['/slow/h2-reset', '/slow/h2-conn'])
      expect(await accessLine(path)).toMatchObject({ api_id: 'slow', status: 499, decision: 'allow', protocol: '2' });
    // the reset stream's connection goes on serving (the answer read to its end)
    const next = session.request({ ':path': '/slow/after' });
    let status: unknown;
    next.on('response', (h) => (status = h[':status']));
    next.resume();
    await new Promise((r) => next.on('close', r));
    expect(status).toBe(200);
    session.close();
  }, 10_000);

  test('gRPC: a call the grpc-js client cancels before the upstream answered', async () => {
    const client = new DeafClient(new URL(origin).host, grpc.credentials.createInsecure());
    try {
      const status = new Promise<grpc.ServiceError | null>((resolve) => {
        const call = client.makeUnaryRequest(SERVICE.Wait.path, pass, pass, Buffer.from('x'), (e) => resolve(e));
        setTimeout(() => call.cancel(), 300);
      });
      expect((await status)?.code).toBe(grpc.status.CANCELLED);
    } finally {
      client.close();
    }
    expect(await accessLine('/test.Deaf/Wait')).toMatchObject({
      api_id: 'deaf',
      status: 499,
      decision: 'allow',
      protocol: 'grpc',
    });
  });

  test('a client that leaves after its answer began keeps the status it was sent (200)', async () => {
    const c = netConnect(port, '127.0.0.1', () => c.write('GET /partial/cut HTTP/1.1\r\nHost: gw\r\n\r\n'));
    c.on('error', () => undefined);
    const head = await new Promise<string>((r) => c.once('data', (d: Buffer) => r(d.toString('latin1'))));
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    c.destroy();
    expect(await accessLine('/partial/cut')).toMatchObject({ api_id: 'partial', status: 200, decision: 'allow' });
  });

  test('gw_requests_total counts each as the access log does: 4xx, never 5xx', async () => {
    // the upstream calls of the requests above have all been aborted by now (the last access line was written)
    const lines = await requestsTotal();
    expect(lines).toContain('gw_requests_total{api="slow",code="4xx"} 4');
    expect(lines).toContain('gw_requests_total{api="deaf",code="4xx"} 1');
    expect(lines.filter((l) => l.includes('code="5xx"'))).toEqual([]);
    expect(lines).toContain('gw_requests_total{api="slow",code="2xx"} 1');
    expect(lines).toContain('gw_requests_total{api="partial",code="2xx"} 1');
  });
});
