/**
 * The bare Node.js baselines of the HTTP/2 and TLS rows of `make bench` (test/bench/protocols.ts), each the
 * least a proxy of that protocol does, forwarding to an HTTP/1.1 upstream through an undici Pool as
 * bare-proxy.ts does:
 *   h2c <port> <upstream>                  node:http2 with prior knowledge, pseudo-headers and HTTP/1.1
 *                                          connection headers dropped (HTTP/2 forbids them);
 *   tls <port> <upstream> <cert> <key>     node:https (TLS 1.2+, ALPN http/1.1), pass-through.
 * Prints "bare proxy ready", and on SIGTERM how many TLS sessions were resumed (the handshake row counts
 * full handshakes only when that is 0).
 */
import {
  createServer as createHttp2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type IncomingHttpHeaders,
} from 'node:http2';
import type { Readable } from 'node:stream';
import { createServer as createHttpsServer } from 'node:https';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import { Pool } from 'undici';

const [mode, port, upstream, certFile, keyFile] = process.argv.slice(2) as [string, string, string, string?, string?];
// no cap on connections, as gw (docs/proxy.md, "Upstream connections")
const pool = new Pool(upstream, { pipelining: 1, keepAliveTimeout: 30_000 });
/** HTTP/1.1 connection-specific headers an HTTP/2 message must not carry (RFC 9113 §8.2.2). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** HTTP/1.1 (TLS): undici's stream(), as bare-proxy.ts. */
function forwardH1(req: IncomingMessage, res: ServerResponse): void {
  const body = req.method === 'GET' || req.method === 'HEAD' ? null : req;
  pool
    .stream(
      { path: req.url ?? '/', method: req.method as 'GET', headers: req.headers, body },
      ({ statusCode, headers }) => {
        res.writeHead(statusCode, headers as OutgoingHttpHeaders);
        return res;
      },
    )
    .catch(() => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
}

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

let resumed = 0;
let handshakes = 0;
const ready = (): void => console.log('bare proxy ready');
if (mode === 'h2c') {
  createHttp2Server(forwardH2).listen(Number(port), '127.0.0.1', ready);
} else if (mode === 'tls') {
  const server = createHttpsServer(
    { cert: readFileSync(certFile!), key: readFileSync(keyFile!), minVersion: 'TLSv1.2', ALPNProtocols: ['http/1.1'] },
    forwardH1,
  );
  server.on('secureConnection', (s: TLSSocket) => {
    handshakes++;
    if (s.isSessionReused()) resumed++;
  });
  server.listen(Number(port), '127.0.0.1', ready);
} else throw new Error(`bare-protocols: unknown mode ${mode}`);
process.on('SIGTERM', () => {
  if (mode === 'tls') console.log(`tls handshakes ${handshakes}, resumed ${resumed}`);
  process.exit(0);
});
