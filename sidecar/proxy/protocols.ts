/**
 * The gateway listener's protocols (docs/proxy.md, "TLS and HTTP/2"): one listening node:http server whose
 * connections are handed, one by one, to the protocol they speak.
 * - plain: HTTP/1.1 (node:http's own connection handling, untouched) or, when the first bytes are the
 *   HTTP/2 connection preface (`PRI * HTTP/2.0`), HTTP/2 with prior knowledge (h2c), unless `h2c: false`;
 * - TLS (`tls` option): the handshake by a tls.Server that never listens, ALPN `h2` → HTTP/2, anything else
 *   → HTTP/1.1 over the TLS socket. Certificate and key files are read again every few seconds and a
 *   change is served to new connections (setSecureContext), so a rotated Secret needs no restart.
 * HTTP/2 requests reach the same handler as HTTP/1.1 ones through node:http2's compatibility API.
 * The listening server keeps counting raw connections (max_connections, per client: lib/serve.ts).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Http2Session, IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket, SecureContextOptions } from 'node:tls';
import type { Logger } from '../../lib/logger.js';
import { DRAIN_DEADLINE } from '../../lib/serve.js';
import { DEFAULT_H2_LIMITS, type TlsOptionNames } from '../../lib/options.js';
import { sha256hex } from '../../lib/hash.js';
import { GroupCounts } from '../../lib/ip/group-counts.js';
import { H2_RESPONSE_HEADER_TABLE_BYTES } from '../../lib/tuning.js';
const http2 = process.getBuiltinModule('node:http2');
const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_REFUSED_STREAM } = http2.constants;
const tls = process.getBuiltinModule('node:tls');
const { readFileSync } = process.getBuiltinModule('node:fs');
const { X509Certificate, createPrivateKey } = process.getBuiltinModule('node:crypto');

export interface ListenerTls {
  cert_file: string;
  key_file: string;
  client_ca_file?: string;
  min_version: 'TLSv1.2' | 'TLSv1.3';
  /** The options' names in errors; default: the config file's (`tls.cert_file`…). */
  names?: TlsOptionNames;
}
const FILE_OPTION_NAMES: TlsOptionNames = { cert: 'tls.cert_file', key: 'tls.key_file', ca: 'tls.client_ca_file' };
/** How long an HTTP/2 connection whose side is ended waits for the client's FIN before it is destroyed (ms). */
const H2_LINGER_MS = 1000;

/** Bounds on one HTTP/2 client connection (the `http2` option). */
export interface Http2Limits {
  max_concurrent_streams: number;
  /** HTTP/2 connections of one client address group open at once */
  max_sessions_per_client: number;
  /** seconds */
  send_timeout: number;
}

/** One HTTP/2 connection's counts: its open streams, and its reset budget (a token bucket). */
interface SessionState {
  session: Http2Session;
  streams: number;
  /** resets before an answer still allowed now */
  resets: number;
  /** when `resets` was last refilled (performance.now()) */
  at: number;
  /** past its reset budget: GOAWAY sent, closing */
  calmed: boolean;
}

/** An open stream for the send-timeout sweep: its queued bytes when last changed, and since when. */
interface OpenStream {
  queued: number;
  since: number;
  /** reset by the sweep */
  swept: boolean;
  /** its session's counts */
  st: SessionState;
}

export interface ProtocolOptions {
  tls?: ListenerTls;
  /** HTTP/2 with prior knowledge on a plain listener (default on). */
  h2c: boolean;
  /** default: lib/options.ts's defaults */
  http2?: Http2Limits;
  logger: Logger;
  /** How often the certificate files are read for a change (ms); default 2 s (served within 10 s). */
  reloadMs?: number;
}

/** The first bytes of every HTTP/2 connection (RFC 9113 §3.4): `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`. */
const PREFACE_START = Buffer.from('PRI ');

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

interface TlsFiles {
  opts: SecureContextOptions & { cert: Buffer; key: Buffer };
  digest: string;
}

/** The TLS files as a secure context's options, read now (not checked: checkTlsFiles); throws with the file named. */
function readTlsFiles(t: ListenerTls): TlsFiles {
  const n = t.names ?? FILE_OPTION_NAMES;
  const read = (file: string, what: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (e) {
      throw new Error(`${what}: cannot read ${file}: ${(e as Error).message}`, { cause: e });
    }
  };
  const cert = read(t.cert_file, n.cert);
  const key = read(t.key_file, n.key);
  const ca = t.client_ca_file !== undefined ? read(t.client_ca_file, n.ca) : undefined;
  const digest = sha256hex(Buffer.concat([cert, key, ca ?? Buffer.alloc(0)]).toString('latin1'), 'latin1');
  return { opts: { cert, key, ...(ca ? { ca } : {}) }, digest };
}

/**
 * Throws, naming the options and files, unless the files make a serving pair: a PEM certificate, a private
 * key that node can use, the key that certificate's public key belongs to (OpenSSL's own error is `key
 * values mismatch`, naming neither), and a client CA bundle that holds a certificate.
 */
function checkTlsFiles(files: TlsFiles, t: ListenerTls): void {
  const n = t.names ?? FILE_OPTION_NAMES;
  const { cert, key, ca } = files.opts;
  let leaf: InstanceType<typeof X509Certificate>;
  try {
    leaf = new X509Certificate(cert);
  } catch (e) {
    throw new Error(`${n.cert}: ${t.cert_file} holds no PEM certificate (${(e as Error).message})`, { cause: e });
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch (e) {
    throw new Error(`${n.key}: ${t.key_file} holds no usable PEM private key (${(e as Error).message})`, {
      cause: e,
    });
  }
  if (!leaf.checkPrivateKey(privateKey))
    throw new Error(`${n.cert} (${t.cert_file}) and ${n.key} (${t.key_file}): key does not match certificate`);
  // node takes a bundle without a certificate silently, and then no client certificate ever verifies
  if (ca !== undefined && !String(ca).includes('-----BEGIN CERTIFICATE-----'))
    throw new Error(`${n.ca}: ${t.client_ca_file} holds no PEM certificate`);
}

/** Whether two client CA bundles (as read: a Buffer, or none) are the same. */
function sameCa(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  return Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b);
}

/** What a secure context refuses that checkTlsFiles did not see, with the options named. */
function contextError(e: unknown, t: ListenerTls): Error {
  const n = t.names ?? FILE_OPTION_NAMES;
  return new Error(`${n.cert} (${t.cert_file}) and ${n.key} (${t.key_file}): ${(e as Error).message}`, { cause: e });
}

function ignoreError(): void {
  // a stream closed before it was served: nobody to tell
}

/**
 * One HTTP/2 stream as a request of node:http2's compatibility API, as node's own request handling makes it
 * (CONNECT: 405; `Expect: 100-continue`: a 100 first; another expectation: 417). A stream already closed
 * when node hands it over (reset by the client in the read that opened it, a rapid reset; refused after its
 * session's reset budget, below) is no request: no request objects are made for it, so a burst of resets
 * costs one stream object each.
 */
function serveStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, raw: string[], handler: Handler): void {
  if (stream.closed) {
    // closed with a code other than CANCEL (the gateway's REFUSED_STREAM, a client's reset with any code) the
    // stream emits an error, which with no listener would take the process down (the request objects listen)
    stream.on('error', ignoreError);
    return;
  }
  const req = new http2.Http2ServerRequest(stream, headers, {}, raw);
  const res = new http2.Http2ServerResponse(stream);
  const connect = headers[':method'] === 'CONNECT';
  const { expect } = headers;
  if (connect || (expect !== undefined && expect !== '100-continue')) {
    res.statusCode = connect ? 405 : 417;
    res.end();
    return;
  }
  if (expect !== undefined) res.writeContinue();
  handler(req as unknown as IncomingMessage, res as unknown as ServerResponse);
}

/**
 * Replaces `server`'s connection handling by the dispatch above. Returns a stop() that ends the
 * certificate reloading (the server's close does it too). Throws when the TLS files cannot be read or
 * do not make a context (a key that does not match its certificate), naming the option.
 */
export function attachProtocols(server: Server, handler: Handler, o: ProtocolOptions): { stop(): void } {
  if (!o.tls && !o.h2c) return { stop: () => undefined };
  const [httpConnection] = server.listeners('connection') as ((socket: Socket) => void)[];
  if (httpConnection === undefined) throw new Error('the gateway server has no connection handling');
  server.removeListener('connection', httpConnection);
  const asHttp1 = (socket: Socket): void => httpConnection.call(server, socket);

  // a client's streams at once are capped (SETTINGS_MAX_CONCURRENT_STREAMS, enforced: past it REFUSED_STREAM);
  // node's own default is no cap, so one connection could hold any number of upstream calls and buffers
  const limits = o.http2 ?? DEFAULT_H2_LIMITS;
  // response heads without an HPACK dynamic table (lib/tuning.ts); each stream's request made by serveStream
  const h2 = http2.createServer({
    settings: { maxConcurrentStreams: limits.max_concurrent_streams },
    maxDeflateDynamicTableSize: H2_RESPONSE_HEADER_TABLE_BYTES,
  });
  h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, raw: string[]) =>
    serveStream(stream, headers, raw, handler),
  );
  const sendTimeoutMs = limits.send_timeout * 1000;
  // a stream whose answer cannot move for send_timeout is reset: its upstream call is cancelled and its
  // buffered chunks freed (each stream holds at most its 16 KiB write buffer and one upstream chunk: the
  // upstream is paused). Stuck: data queued that the stream cannot send (the client grants it no window,
  // or its connection takes nothing), or the connection-level window left at 0 by the client; a change of
  // the queued amount is progress. An idle stream (a gRPC stream between messages, a long poll) has nothing
  // queued and is left alone. A sweep of the open streams rather than node's per-stream timeout: that one
  // is refreshed by the session's activity on other streams, so one stuck stream per connection was never
  // reset (test/integration/hostile/h2-stream-slow-reader.test.ts).
  const open = new Map<ServerHttp2Stream, OpenStream>();
  const sweep = setInterval(
    () => {
      const now = performance.now();
      for (const [stream, seen] of open) {
        if (stream.destroyed) {
          open.delete(stream);
          continue;
        }
        const queued = stream.writableLength;
        const stuck = queued > 0 || stream.session?.state.remoteWindowSize === 0;
        if (!stuck || queued !== seen.queued) {
          seen.queued = queued;
          seen.since = now;
        } else if (now - seen.since >= sendTimeoutMs) {
          seen.swept = true;
          stream.close(NGHTTP2_CANCEL);
        }
      }
    },
    Math.min(1000, Math.max(50, sendTimeoutMs / 4)),
  );
  sweep.unref();
  server.once('close', () => clearInterval(sweep));
  const sessions = new Set<Http2Session>();
  // rapid reset (CVE-2023-44487): a stream the client resets before its answer's head costs the gateway a
  // handler run and is not counted by max_concurrent_streams. A connection may reset a burst of
  // 2 × max_concurrent_streams such streams, refilled at max_concurrent_streams per second; past it, it gets
  // GOAWAY ENHANCE_YOUR_CALM, the streams it opened meanwhile are refused (REFUSED_STREAM) and it is closed
  // (nghttp2's own limit, 1,000 then 33/s, answers INTERNAL_ERROR). node emits a stream on the tick after
  // the read that brought it: a stream reset within the same read is already closed then.
  const resetBurst = 2 * limits.max_concurrent_streams;
  const resetRate = limits.max_concurrent_streams / 1000; // per ms
  const calm = (s: Http2Session, st: SessionState): void => {
    if (st.calmed || s.destroyed) return;
    st.calmed = true;
    s.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
    setImmediate(() => s.destroy()); // not inside nghttp2's read of the frames
  };
  const resetEarly = (s: Http2Session, st: SessionState): void => {
    if (st.calmed || s.destroyed || s.closed) return; // a session closing takes its streams with it
    const now = performance.now();
    st.resets = Math.min(resetBurst, st.resets + (now - st.at) * resetRate) - 1;
    st.at = now;
    if (st.resets < 0) calm(s, st);
  };
  // one listener per stream: its close, when a reset by the client before the answer's end (node's
  // `aborted`) also spends the session's reset budget; one the sweep reset does not
  function onClose(this: ServerHttp2Stream): void {
    const seen = open.get(this);
    if (seen === undefined) return;
    open.delete(this);
    const { st } = seen;
    st.streams--;
    if (this.aborted && !seen.swept) resetEarly(st.session, st);
  }
  // HTTP/2 connections per client address group: each may hold max_concurrent_streams upstream calls, so
  // max_connections_per_client (sized for HTTP/1.1, one call per connection) is far too loose for them; one
  // past the cap gets GOAWAY ENHANCE_YOUR_CALM and is closed (its streams refused), the others of that
  // address are served
  const perClient = new GroupCounts(limits.max_sessions_per_client);
  // a session with no stream open and nothing received for headers_timeout is cut, as an HTTP/1.1 connection
  // whose head does not come (a TLS h2 connection without its preface, an h2c one that opens no stream);
  // one with an open stream is left to the stream rules (an idle gRPC stream is legitimate)
  h2.on('session', (s: Http2Session) => {
    s.on('error', () => undefined); // a client gone mid-session: its streams are closed, nothing to answer
    const st: SessionState = { session: s, streams: 0, resets: resetBurst, at: performance.now(), calmed: false };
    // first among the session's 'stream' listeners: before node's server hands the stream to the handler
    s.prependListener('stream', (stream: ServerHttp2Stream) => {
      if (stream.closed) {
        resetEarly(s, st); // reset in the read that opened it
        return;
      }
      if (st.calmed) {
        stream.close(NGHTTP2_REFUSED_STREAM); // the handler sees it closed: no upstream call
        return;
      }
      open.set(stream, { queued: 0, since: performance.now(), swept: false, st });
      st.streams++;
      stream.on('close', onClose);
    });
    const leave = perClient.enter(s.socket?.remoteAddress);
    if (leave === undefined) {
      calm(s, st);
      return;
    }
    sessions.add(s);
    s.once('close', () => {
      sessions.delete(s);
      leave();
    });
    const idleMs = server.headersTimeout || 60_000;
    s.setTimeout(idleMs);
    s.on('timeout', () => {
      if (st.streams > 0) s.setTimeout(idleMs);
      else s.destroy();
    });
  });
  h2.on('sessionError', () => undefined);
  // node:http's sockets are half-open (allowHalfOpen), and node:http2 never closes its side on the client's
  // FIN: the connection stayed in CLOSE-WAIT for good, counted against the connection caps. A client that
  // half-closes sends nothing more (no frame, no stream): the session is ended at once, as nginx does.
  // The other way round, a session that ended its side (its FIN sent: closed by the client's GOAWAY, by
  // the drain or by the gateway) waited for the client's FIN for good: a client that keeps its socket open
  // held a connection slot in FIN-WAIT-2 and kept the drain from ever ending. Nothing more can come on it:
  // it is destroyed LINGER_MS later (time for the client to read what was sent before any RST).
  const asHttp2 = (socket: Socket): void => {
    socket.once('end', () => socket.destroy());
    socket.once('finish', () => {
      if (!socket.destroyed) setTimeout(() => socket.destroy(), H2_LINGER_MS);
    });
    h2.emit('connection', socket);
  };

  // the drain (lib/serve.ts drain): idle HTTP/1.1 connections close at once, HTTP/2 sessions get a GOAWAY
  // and finish their streams; at the deadline every session is destroyed
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    closeIdle();
    for (const s of sessions) s.close();
  };
  server.on(DRAIN_DEADLINE, () => {
    for (const s of sessions) s.destroy();
  });

  let stop = (): void => undefined;
  if (o.tls) {
    const t = o.tls;
    let current = readTlsFiles(t);
    checkTlsFiles(current, t);
    let tlsServer: ReturnType<typeof tls.createServer>;
    try {
      tlsServer = tls.createServer({
        ...current.opts,
        minVersion: t.min_version,
        ALPNProtocols: ['h2', 'http/1.1'],
        // a client certificate is asked for with a CA bundle; one that is sent must verify (checked below),
        // none at all is admitted (a key bound to a certificate is refused later: auth.ts)
        requestCert: t.client_ca_file !== undefined,
        rejectUnauthorized: false,
        handshakeTimeout: 10_000,
      });
    } catch (e) {
      throw contextError(e, t);
    }
    tlsServer.on('tlsClientError', (_e: Error, socket: TLSSocket) => socket.destroy());
    tlsServer.on('secureConnection', (socket: TLSSocket) => {
      // no client-initiated renegotiation (TLS 1.2): a second handshake could present a certificate that the
      // check below never sees; an attempt is an error, and any error ends the connection
      socket.disableRenegotiation();
      socket.on('error', () => socket.destroy());
      if (t.client_ca_file !== undefined && !socket.authorized) {
        const peer = socket.getPeerCertificate();
        if (peer !== null && Object.keys(peer).length > 0) {
          socket.destroy(); // a client certificate that does not verify against client_ca_file
          return;
        }
      }
      if (socket.alpnProtocol === 'h2') asHttp2(socket);
      else asHttp1(socket);
    });
    server.on('connection', (raw: Socket) => void tlsServer.emit('connection', raw));
    // rotation: the files read again every reloadMs; a change (a Secret update swaps them) becomes the
    // context of new connections once checkTlsFiles accepts it. A pair it refuses (a key that does not
    // match the certificate, one file written and not the other yet) is logged once as an error and the
    // previous certificate goes on serving; the next change is tried again. Files that cannot be read are
    // logged once per cause, until they can.
    let refusedDigest = '';
    let unreadable = '';
    const timer = setInterval(() => {
      let next: TlsFiles;
      try {
        next = readTlsFiles(t);
      } catch (e) {
        const err = (e as Error).message;
        if (err !== unreadable)
          o.logger.error({ err }, 'gateway TLS files unreadable; the previous certificate is kept');
        unreadable = err;
        return;
      }
      unreadable = '';
      if (next.digest === current.digest || next.digest === refusedDigest) return;
      try {
        checkTlsFiles(next, t);
        try {
          tlsServer.setSecureContext({ ...next.opts, minVersion: t.min_version });
        } catch (e) {
          throw contextError(e, t);
        }
      } catch (e) {
        refusedDigest = next.digest;
        o.logger.error(
          { err: (e as Error).message },
          'gateway TLS files changed but were refused; the previous certificate is kept',
        );
        return;
      }
      // the options whose file changed, by the names the user wrote (tls.client_ca_file, --tls-cert…)
      const n = t.names ?? FILE_OPTION_NAMES;
      const changed = [
        ...(next.opts.cert.equals(current.opts.cert) ? [] : [n.cert]),
        ...(next.opts.key.equals(current.opts.key) ? [] : [n.key]),
        ...(sameCa(next.opts.ca, current.opts.ca) ? [] : [n.ca]),
      ];
      current = next;
      refusedDigest = '';
      o.logger.info({ changed }, 'gateway TLS files reloaded');
    }, o.reloadMs ?? 2000);
    timer.unref();
    stop = () => clearInterval(timer);
    server.once('close', stop);
  } else {
    server.on('connection', (socket: Socket) => {
      let seen: Buffer | undefined;
      socket.on('error', () => undefined); // reset before its first bytes: nothing to answer
      // a connection that sends nothing is cut as node:http cuts a head that does not come (408)
      const silent = setTimeout(() => {
        socket.removeListener('data', onData);
        const err = Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
        server.emit('clientError', err, socket);
      }, server.headersTimeout || 60_000);
      const onData = (chunk: Buffer): void => {
        const head = seen === undefined ? chunk : Buffer.concat([seen, chunk]);
        // fewer bytes than "PRI " that could still be its start: wait for the next ones
        if (head.length < PREFACE_START.length && PREFACE_START.subarray(0, head.length).equals(head)) {
          seen = head;
          return;
        }
        clearTimeout(silent);
        socket.removeListener('data', onData);
        socket.pause();
        socket.unshift(head);
        // HTTP/2 takes the unshifted bytes from the socket's buffer itself (resuming would emit them past it);
        // node:http reads them as 'data' once the socket flows again
        if (head.subarray(0, PREFACE_START.length).equals(PREFACE_START)) asHttp2(socket);
        else {
          asHttp1(socket);
          socket.resume();
        }
      };
      socket.on('data', onData);
    });
  }
  return { stop };
}
