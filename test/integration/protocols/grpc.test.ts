/**
 * gRPC through `gw standalone` (docs/proxy.md, "gRPC"), with a real @grpc/grpc-js server behind an
 * `h2c://` target and a real grpc-js client on the plain listener (h2c): the four call kinds, trailers,
 * refusals as gRPC statuses (RESOURCE_EXHAUSTED for a per-method limit, UNAUTHENTICATED, PERMISSION_DENIED),
 * a key's limit counted across HTTP/1.1 and gRPC, cancellation reaching the upstream, and a 100 MB server
 * stream to a slow reader with the gateway's RSS bounded; a `grpc-timeout` passing before and after the
 * upstream's headers (a bare node:http2 upstream that ignores deadlines, as grpc-js's server enforces them
 * itself).
 */
import * as grpc from '@grpc/grpc-js';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect as h2connect, constants as h2constants, createServer as createH2Server } from 'node:http2';
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { request } from 'undici';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { sha256hex } from '../../../lib/hash.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { bufferMethod, pass } from '../../helpers/grpc.js';

const method = (name: string, requestStream: boolean, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> =>
  bufferMethod(`/test.Echo/${name}`, requestStream, responseStream);
const SERVICE = {
  Unary: method('Unary', false, false),
  Limited: method('Limited', false, false),
  Slow: method('Slow', false, false),
  Numbers: method('Numbers', false, true),
  Big: method('Big', false, true),
  Sum: method('Sum', true, false),
  Chat: method('Chat', true, true),
} satisfies grpc.ServiceDefinition;
const EchoClient = grpc.makeGenericClientConstructor(SERVICE, 'Echo');
type Client = InstanceType<typeof EchoClient>;

const KEY = 'grpc-key-0000001';
const SHARED = 'grpc-key-shared1';
const BIG = 100 * 1024 * 1024;
/** A gRPC message frame (uncompressed) around `b`. */
const frame = (b: Buffer): Buffer => Buffer.concat([Buffer.from([0, 0, 0, 0, b.length]), b]);

/**
 * One gRPC call over a bare HTTP/2 connection with `grpc-timeout` and no deadline of the client's own (a
 * grpc-js client reports its own timer's status first): the HEADERS the gateway answered with, the data
 * bytes, the trailers (undefined: a trailers-only answer).
 */
function rawCall(
  origin: string,
  path: string,
  timeout: string,
  o: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ headers: IncomingHttpHeaders; data: Buffer; trailers?: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const session = h2connect(origin);
    session.on('error', reject);
    const r = session.request(
      {
        ':method': o.method ?? 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': timeout,
        ...o.headers,
      },
      { endStream: false }, // node ends a GET's stream itself
    );
    let headers: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders | undefined;
    const data: Buffer[] = [];
    r.on('response', (h) => (headers = h));
    r.on('trailers', (t) => (trailers = t));
    r.on('data', (c: Buffer) => data.push(c));
    r.on('error', reject);
    r.on('close', () => {
      session.close();
      resolve({ headers, data: Buffer.concat(data), trailers });
    });
    r.end(frame(Buffer.from('x')));
  });
}

/** Bytes of the Big stream the upstream has written so far (it shares the test's process). */
let bigSent = 0;

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0);
}

describe('gRPC through the gateway (h2c client, h2c upstream)', () => {
  let upstream: grpc.Server;
  let echo: { server: Server; url: string };
  let gw: Standalone;
  let dir: string;
  let client: Client;
  const cancelled: string[] = [];
  // never answers (/test.Deaf/Silent), answers headers and one message, then nothing (/test.Deaf/Started), or
  // answers after 200 ms (/test.Deaf/Answer);
  // the RST_STREAM code each of its streams ended with
  let deaf: Http2Server;
  const deafClosed = new Map<string, number>();

  beforeAll(async () => {
    upstream = new grpc.Server();
    upstream.addService(SERVICE, {
      Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        if (call.request.toString() === 'fail') return cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' });
        const md = new grpc.Metadata();
        md.set('x-seen-auth', String(call.metadata.get('authorization')[0] ?? ''));
        call.sendMetadata(md);
        cb(null, Buffer.concat([Buffer.from('echo:'), call.request]));
      },
      Limited: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        cb(null, Buffer.from('ok')),
      Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const t = setTimeout(() => cb(null, Buffer.from('late')), 10_000);
        call.on('cancelled', () => {
          clearTimeout(t);
          cancelled.push(call.request.toString());
        });
      },
      Numbers: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        const n = Number(call.request.toString());
        for (let i = 0; i < n; i++) call.write(Buffer.from(String(i)));
        const trailer = new grpc.Metadata();
        trailer.set('x-trailer', 'counted');
        call.end(trailer);
      },
      Big: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        const chunk = Buffer.alloc(64 * 1024, 7);
        bigSent = 0;
        const more = (): void => {
          while (bigSent < BIG) {
            bigSent += chunk.length;
            if (!call.write(chunk)) return void call.once('drain', more);
          }
          call.end();
        };
        call.on('cancelled', () => (bigSent = BIG));
        more();
      },
      Sum: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        let total = 0;
        call.on('data', (b: Buffer) => (total += Number(b.toString())));
        call.on('end', () => cb(null, Buffer.from(String(total))));
      },
      Chat: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        call.on('data', (b: Buffer) => call.write(Buffer.concat([Buffer.from('re:'), b])));
        call.on('end', () => call.end());
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      upstream.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    echo = await startEcho();
    deaf = createH2Server();
    deaf.on('stream', (s: ServerHttp2Stream, h: IncomingHttpHeaders) => {
      const path = String(h[':path']);
      s.on('error', () => undefined);
      s.resume();
      s.on('close', () => deafClosed.set(path, s.rstCode));
      if (path === '/test.Deaf/Started') {
        s.respond({ ':status': 200, 'content-type': 'application/grpc' });
        s.write(frame(Buffer.from('first')));
      }
      // answers after 200 ms, whatever its grpc-timeout (grpc-js's server arms a deadline past 2^31−1 ms with
      // a plain timer, which fires at once: its own cancel raced its answer)
      if (path === '/test.Deaf/Answer')
        setTimeout(() => {
          if (s.destroyed) return;
          s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
          s.end(frame(Buffer.from('ok')));
        }, 200);
    });
    await new Promise<void>((r) => deaf.listen(0, '127.0.0.1', r));
    dir = tempDir();
    writeFileSync(
      join(dir, 'r.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: grpc}
spec:
  proxy: {listen_path: /test.Echo/, strip_listen_path: false, target_url: h2c://127.0.0.1:${port}}
  use_extended_paths: true
  extended_paths:
    rate_limit:
      - {method: POST, path: /test.Echo/Limited, rate: 2, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: deaf}
spec:
  use_keyless: true
  proxy: {listen_path: /test.Deaf/, strip_listen_path: false, target_url: h2c://127.0.0.1:${(deaf.address() as { port: number }).port}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: h1}
spec:
  proxy: {listen_path: /h1/, target_url: ${echo.url}}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: k}
spec: {key_hash: ${sha256hex(KEY)}, rate: 1000, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: shared}
spec: {key_hash: ${sha256hex(SHARED)}, rate: 3, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: elsewhere}
spec:
  key_hash: ${sha256hex('grpc-key-h1-only')}
  access_rights:
    h1: {api_id: h1, api_name: h1}
`,
    );
    gw = await startStandalone(dir);
    client = new EchoClient(new URL(gw.gateway).host, grpc.credentials.createInsecure());
  }, 30_000);

  afterAll(async () => {
    client?.close();
    await gw?.stop();
    await upstream?.tryShutdown(() => undefined);
    upstream?.forceShutdown();
    await new Promise((r) => echo?.server.close(r));
    await new Promise((r) => deaf?.close(r));
    if (dir) cleanup(dir);
  });

  const md = (key?: string): grpc.Metadata => {
    const m = new grpc.Metadata();
    if (key !== undefined) m.set('authorization', key);
    return m;
  };
  const unary = (
    name: 'Unary' | 'Limited' | 'Slow',
    body: string,
    key?: string,
  ): Promise<{ value?: Buffer; err?: grpc.ServiceError }> =>
    new Promise((resolve) => {
      client.makeUnaryRequest(SERVICE[name].path, pass, pass, Buffer.from(body), md(key), {}, (err, value) =>
        resolve({ value: value ?? undefined, err: err ?? undefined }),
      );
    });

  test('unary: the answer, the upstream seeing the key, its error status relayed', async () => {
    const ok = await unary('Unary', 'hello', KEY);
    expect(ok.err).toBeUndefined();
    expect(ok.value?.toString()).toBe('echo:hello');
    const failed = await unary('Unary', 'fail', KEY);
    expect(failed.err?.code).toBe(grpc.status.NOT_FOUND);
    expect(failed.err?.details).toBe('no such thing');
  });

  test('server streaming, with its trailers', async () => {
    const call = client.makeServerStreamRequest(SERVICE.Numbers.path, pass, pass, Buffer.from('50'), md(KEY), {});
    const got: string[] = [];
    call.on('data', (b: Buffer) => got.push(b.toString()));
    const status = await new Promise<grpc.StatusObject>((r) => call.on('status', r));
    expect(status.code).toBe(grpc.status.OK);
    expect(got).toHaveLength(50);
    expect(got[49]).toBe('49');
    expect(status.metadata.get('x-trailer')).toEqual(['counted']);
  });

  test('client streaming and bidirectional streaming', async () => {
    const sum = await new Promise<string>((resolve, reject) => {
      const call = client.makeClientStreamRequest(SERVICE.Sum.path, pass, pass, md(KEY), {}, (err, v) =>
        err ? reject(err) : resolve(String(v)),
      );
      for (let i = 1; i <= 100; i++) call.write(Buffer.from(String(i)));
      call.end();
    });
    expect(sum).toBe('5050');
    const chat = client.makeBidiStreamRequest(SERVICE.Chat.path, pass, pass, md(KEY), {});
    const replies: string[] = [];
    // each message is answered before the next is sent: the stream is live both ways, not buffered
    for (const m of ['a', 'b', 'c']) {
      const reply = new Promise<string>((r) => chat.once('data', (b: Buffer) => r(b.toString())));
      chat.write(Buffer.from(m));
      replies.push(await reply);
    }
    chat.end();
    await new Promise((r) => chat.on('status', r));
    expect(replies).toEqual(['re:a', 're:b', 're:c']);
  });

  test('refusals are gRPC statuses: per-method limit → RESOURCE_EXHAUSTED with retry-after; no key → UNAUTHENTICATED; key refused → PERMISSION_DENIED', async () => {
    expect((await unary('Limited', '', KEY)).err).toBeUndefined();
    expect((await unary('Limited', '', KEY)).err).toBeUndefined();
    const limited = await unary('Limited', '', KEY);
    expect(limited.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(limited.err?.details).toBe('API Rate Limit Exceeded');
    expect(limited.err?.metadata.get('retry-after')[0]).toBeDefined();
    // the other methods of the API are not limited by that rule
    expect((await unary('Unary', 'x', KEY)).err).toBeUndefined();
    expect((await unary('Unary', 'x')).err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await unary('Unary', 'x', 'unknown-key-000')).err?.code).toBe(grpc.status.PERMISSION_DENIED);
    expect((await unary('Unary', 'x', 'grpc-key-h1-only')).err?.code).toBe(grpc.status.PERMISSION_DENIED);
  });

  test('a gRPC call that is not a POST: UNIMPLEMENTED, not forwarded (a rule written for POST is not side-stepped)', async () => {
    // the Limited method's POST rule is spent by the test above: GET, PUT and OPTIONS are refused too
    for (const method of ['GET', 'PUT', 'OPTIONS']) {
      const r = await rawCall(gw.gateway, '/test.Echo/Limited', '5S', { method, headers: { authorization: KEY } });
      expect([method, r.headers[':status'], r.headers['grpc-status'], r.headers['grpc-message']]).toEqual([
        method,
        200,
        String(grpc.status.UNIMPLEMENTED),
        'Method Not Allowed: a gRPC call is a POST',
      ]);
    }
    const post = await rawCall(gw.gateway, '/test.Echo/Limited', '5S', { headers: { authorization: KEY } });
    expect(post.headers['grpc-status']).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
  });

  test("a key's limit is one across HTTP/1.1 and gRPC calls", async () => {
    const h1 = await request(`${gw.gateway}/h1/x`, { headers: { authorization: SHARED } });
    await h1.body.text();
    expect(h1.statusCode).toBe(200);
    expect((await unary('Unary', 'a', SHARED)).err).toBeUndefined();
    expect((await unary('Unary', 'b', SHARED)).err).toBeUndefined();
    const over = await unary('Unary', 'c', SHARED);
    expect(over.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(over.err?.details).toBe('Rate Limit Exceeded');
    const h1over = await request(`${gw.gateway}/h1/x`, { headers: { authorization: SHARED } });
    await h1over.body.text();
    expect(h1over.statusCode).toBe(429);
  });

  test('a call cancelled by the client is cancelled upstream', async () => {
    const call = client.makeUnaryRequest(
      SERVICE.Slow.path,
      pass,
      pass,
      Buffer.from('cancel-me'),
      md(KEY),
      {},
      () => undefined,
    );
    await new Promise((r) => setTimeout(r, 300));
    call.cancel();
    const t0 = Date.now();
    while (!cancelled.includes('cancel-me') && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 50));
    expect(cancelled).toContain('cancel-me');
  });

  test('a deadline (grpc-timeout) ends the call and the upstream call', async () => {
    const t0 = Date.now();
    const r = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        SERVICE.Slow.path,
        pass,
        pass,
        Buffer.from('deadline'),
        md(KEY),
        { deadline: Date.now() + 500 },
        (e) => resolve(e),
      ),
    );
    expect(r?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(Date.now() - t0).toBeLessThan(3000);
    const t1 = Date.now();
    while (!cancelled.includes('deadline') && Date.now() - t1 < 3000) await new Promise((res) => setTimeout(res, 50));
    expect(cancelled).toContain('deadline');
  });

  test("a grpc-timeout past node's 24.8-day timer bound (99999999H, 2147484S) is a deadline like another, not one passed at once", async () => {
    for (const timeout of ['99999999H', '2147484S']) {
      const r = await rawCall(gw.gateway, '/test.Deaf/Answer', timeout);
      expect([timeout, r.headers[':status'], r.trailers?.['grpc-status']]).toEqual([timeout, 200, '0']);
      expect(r.data.equals(frame(Buffer.from('ok')))).toBe(true);
    }
  });

  test('grpc-timeout passing before the upstream answered: trailers-only DEADLINE_EXCEEDED "Deadline exceeded", the upstream stream cancelled', async () => {
    const r = await rawCall(gw.gateway, '/test.Deaf/Silent', '300m');
    expect(r.headers[':status']).toBe(200);
    expect(r.headers['content-type']).toBe('application/grpc');
    expect(r.headers['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(r.headers['grpc-message']).toBe('Deadline exceeded');
    expect(r.trailers).toBeUndefined(); // one HEADERS frame that ends the stream
    expect(r.data.length).toBe(0);
    const t0 = Date.now();
    while (!deafClosed.has('/test.Deaf/Silent') && Date.now() - t0 < 3000)
      await new Promise((res) => setTimeout(res, 20));
    expect(deafClosed.get('/test.Deaf/Silent')).toBe(h2constants.NGHTTP2_CANCEL);
  });

  test('grpc-timeout passing after the upstream sent headers and a message: both relayed, then DEADLINE_EXCEEDED trailers', async () => {
    const r = await rawCall(gw.gateway, '/test.Deaf/Started', '300m');
    expect(r.headers[':status']).toBe(200);
    expect(r.headers['grpc-status']).toBeUndefined();
    expect(r.data.equals(frame(Buffer.from('first')))).toBe(true);
    expect(r.trailers?.['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(r.trailers?.['grpc-message']).toBe('Deadline exceeded');
    const t0 = Date.now();
    while (!deafClosed.has('/test.Deaf/Started') && Date.now() - t0 < 3000)
      await new Promise((res) => setTimeout(res, 20));
    expect(deafClosed.get('/test.Deaf/Started')).toBe(h2constants.NGHTTP2_CANCEL);
  });

  // backpressure end to end: the upstream is never more than a few HTTP/2 windows ahead of the reader (~1 MB
  // measured); the gateway's RSS still grows as 100 MB of chunks pass through it before the collector gives
  // them back (~70 MB measured, a plateau from ~50 MB on), well under the 100 MB a buffered stream would add
  test('a 100 MB server stream to a slow reader: delivered whole, the upstream at most 8 MB ahead, the gateway RSS up by less than 96 MB', async () => {
    const pid = gw.proc.pid!;
    const before = rssKb(pid);
    let peak = before;
    let ahead = 0;
    const call = client.makeServerStreamRequest(SERVICE.Big.path, pass, pass, Buffer.alloc(0), md(KEY), {});
    let got = 0;
    // the reader takes ~25 MB/s: paused 40 ms after every MB
    let sinceBreak = 0;
    call.on('data', (b: Buffer) => {
      got += b.length;
      sinceBreak += b.length;
      if (sinceBreak >= 1024 * 1024) {
        sinceBreak = 0;
        call.pause();
        peak = Math.max(peak, rssKb(pid));
        ahead = Math.max(ahead, bigSent - got);
        setTimeout(() => call.resume(), 40);
      }
    });
    // the status comes with the trailers, maybe before the reader has taken every buffered message
    const [status] = await Promise.all([
      new Promise<grpc.StatusObject>((r) => call.on('status', r)),
      new Promise((r) => call.on('end', r)),
    ]);
    expect(status.code).toBe(grpc.status.OK);
    expect(got).toBe(BIG);
    process.stdout.write(
      `gateway RSS ${Math.round(before / 1024)} MB before, peak ${Math.round(peak / 1024)} MB; upstream ahead by at most ${Math.round(ahead / 1024)} KB\n`,
    );
    expect(ahead).toBeLessThan(8 * 1024 * 1024);
    expect(peak - before).toBeLessThan(96 * 1024);
  }, 60_000);
});
