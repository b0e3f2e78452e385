/**
 * The bare Node.js baselines of the HTTP/2 and TLS rows of `make bench` (test/bench/protocols.ts), each the
 * least a proxy of that protocol does, forwarding to an HTTP/1.1 upstream through an undici Pool as
 * bare-proxy.ts does (gRPC: to an HTTP/2 upstream):
 *   h2c <port> <upstream>                  node:http2 with prior knowledge, pseudo-headers and HTTP/1.1
 *                                          connection headers dropped (HTTP/2 forbids them);
 *   tls <port> <upstream> <cert> <key>     node:https (TLS 1.2+, ALPN http/1.1), pass-through;
 *   grpc <port> <upstream>                 node:http2 with prior knowledge to an h2c gRPC upstream over one
 *                                          node:http2 session (no undici), trailers relayed.
 * Prints "bare proxy ready", and on SIGTERM how many TLS sessions were resumed (the handshake row counts
 * full handshakes only when that is 0).
 */
import {
  connect as connectHttp2,
  constants as http2Constants,
  createServer as createHttp2Server,
  type ClientHttp2Session,
  type OutgoingHttpHeaders as OutgoingHttp2Headers,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type IncomingHttpHeaders,
} from 'node:http2';
import type { Readable } from 'node:stream';
import { createServer as createHttpsServer } from 'node:https';
import type { OutgoingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import { Pool } from 'undici';
import { passThrough } from './bare-forward.js';

const [mode, port, upstream, certFile, keyFile] = process.argv.slice(2) as [string, string, string, string?, string?];
// no cap on connections, as gw (docs/proxy.md, "Upstream connections")
const pool = new Pool(upstream, { pipelining: 1, keepAliveTimeout: 30_000 });
/** HTTP/1.1 connection-specific headers an HTTP/2 message must not carry (RFC 9113 §8.2.2). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * HTTP/2: undici's dispatch handler API, the body written through with backpressure, the upstream request
 * aborted when the client's stream closes first; nothing else.
 */
function forwardH2(req: Http2ServerRequest, res: Http2ServerResponse): void {
  const headers: IncomingHttpHeaders = {};
  for (const k in req.headers) if (k.charCodeAt(0) !== 58) headers[k] = req.headers[k];
  const body = req.stream.endAfterHeaders ? null : req;
  pool.dispatch(
    { origin: upstream, path: req.url, method: req.method as 'GET', headers, body: body as unknown as Readable },
    {
      // a client stream reset before the end (h2load stops with streams open) aborts the upstream request,
      // or the paused request would hold its pooled connection for ever
      onRequestStart(c) {
        res.once('close', () => {
          if (!res.writableEnded) c.abort(new Error('client stream closed'));
        });
      },
      onResponseStart(_c, statusCode, h) {
        for (const k of HOP) delete h[k];
        res.writeHead(statusCode, h as OutgoingHttpHeaders);
      },
      onResponseData(c, chunk: Buffer) {
        if (!res.write(chunk)) {
          c.pause();
          res.once('drain', () => c.resume());
        }
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError() {
        if (res.headersSent) res.stream.close();
        else res.writeHead(502).end();
      },
    },
  );
}

/** One HTTP/2 session to the gRPC upstream (`grpc` mode), opened again when it ends. */
let upstreamSession: ClientHttp2Session | undefined;
function grpcSession(): ClientHttp2Session {
  if (upstreamSession === undefined || upstreamSession.closed || upstreamSession.destroyed) {
    const s = connectHttp2(upstream);
    s.on('error', () => undefined);
    s.once('close', () => {
      if (upstreamSession === s) upstreamSession = undefined;
    });
    upstreamSession = s;
  }
  return upstreamSession;
}

/**
 * gRPC (h2c to h2c): the call's headers but the pseudo-headers, its body piped, the answer's headers,
 * body and trailers relayed, the upstream stream cancelled when the client's closes first; nothing else.
 */
function forwardGrpc(req: Http2ServerRequest, res: Http2ServerResponse): void {
  const headers: OutgoingHttp2Headers = {};
  for (const k in req.headers) if (k.charCodeAt(0) !== 58) headers[k] = req.headers[k];
  headers[':method'] = req.method;
  headers[':path'] = req.url;
  const end = req.stream.endAfterHeaders;
  const s = grpcSession().request(headers, { endStream: end });
  if (!end) req.pipe(s);
  s.on('response', (h) => {
    const status = Number(h[':status']);
    delete h[':status'];
    res.writeHead(status, h as OutgoingHttpHeaders);
  });
  s.on('data', (chunk: Buffer) => {
    if (res.write(chunk)) return;
    s.pause();
    res.once('drain', () => s.resume());
  });
  s.on('trailers', (t) => res.addTrailers(t));
  s.on('end', () => res.end());
  s.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
  res.once('close', () => {
    if (!s.destroyed) s.close(http2Constants.NGHTTP2_CANCEL);
  });
}

let resumed = 0;
let handshakes = 0;
const ready = (): void => console.log('bare proxy ready');
if (mode === 'h2c') {
  createHttp2Server(forwardH2).listen(Number(port), '127.0.0.1', ready);
} else if (mode === 'tls') {
  const server = createHttpsServer(
    { cert: readFileSync(certFile!), key: readFileSync(keyFile!), minVersion: 'TLSv1.2', ALPNProtocols: ['http/1.1'] },
    passThrough(pool),
  );
  server.on('secureConnection', (s: TLSSocket) => {
    handshakes++;
    if (s.isSessionReused()) resumed++;
  });
  server.listen(Number(port), '127.0.0.1', ready);
} else if (mode === 'grpc') {
  createHttp2Server(forwardGrpc).listen(Number(port), '127.0.0.1', ready);
} else throw new Error(`bare-protocols: unknown mode ${mode}`);
process.on('SIGTERM', () => {
  if (mode === 'tls') console.log(`tls handshakes ${handshakes}, resumed ${resumed}`);
  process.exit(0);
});
