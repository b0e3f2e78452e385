/**
 * HTTP/2 to the upstream (docs/proxy.md, "gRPC"): `h2c://` targets (prior knowledge), and gRPC calls to
 * `http://` (h2c as well: gRPC cannot travel over HTTP/1.1) or `https://` targets (TLS, ALPN h2). One
 * multiplexed session per origin. Trailers are relayed (grpc-status, grpc-message), `grpc-timeout` is
 * enforced by the gateway too, a call cancelled on either side is cancelled on the other, and bodies
 * flow with backpressure both ways (HTTP/2 flow control: a paused stream stops granting window).
 */
import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { ConnectionOptions } from 'node:tls';
import type { Forwarding } from './upstream.js';
import type { UpstreamTls } from './upstream-tls.js';
import { requestHeaders, responseHeaders, writeHeadH2 } from './upstream.js';
import { ERRORS, GRPC, grpcMessage, isGrpc, answer } from './respond.js';
import { clearLongTimeout, setLongTimeout, type LongTimeout } from '../../lib/long-timeout.js';
const http2 = process.getBuiltinModule('node:http2');
const { NGHTTP2_CANCEL } = http2.constants;

export interface H2UpstreamOptions {
  /** ms for the upstream's response headers (upstream_timeout); 504 / DEADLINE_EXCEEDED after. */
  timeoutMs: number;
  onError?: (err: Error, f: Forwarding) => void;
}

export class H2Upstreams {
  private readonly sessions = new Map<string, ClientHttp2Session>();
  constructor(readonly opts: H2UpstreamOptions) {}

  /** The session to `origin` (`http://host:port` for h2c, `https://…` for TLS), opened on first use. */
  session(origin: string, tls?: UpstreamTls): ClientHttp2Session {
    const id = tls === undefined ? origin : `${origin}\0${tls.key}`;
    const open = this.sessions.get(id);
    if (open !== undefined && !open.closed && !open.destroyed) return open;
    const s = http2.connect(origin, { ...tls?.opts, ALPNProtocols: ['h2'] } as ConnectionOptions);
    const forget = (): void => {
      if (this.sessions.get(id) === s) this.sessions.delete(id);
    };
    s.on('error', forget); // a failed session fails its streams, which answer for themselves
    s.once('close', forget);
    s.once('goaway', forget);
    this.sessions.set(id, s);
    return s;
  }

  async close(): Promise<void> {
    await Promise.all(
      [...this.sessions.values()].map((s) => new Promise<void>((r) => (s.closed ? r() : s.close(() => r())))),
    );
    this.sessions.clear();
  }
}

/** `grpc-timeout` (`<digits><H|M|S|m|u|n>`) in ms; undefined when absent or malformed. */
export function grpcTimeoutMs(v: string | string[] | undefined): number | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d{1,8})([HMSmun])$/.exec(v);
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }[m[2] as 'H'];
  return n * unit;
}

/** Trailers worth relaying: pseudo-headers and hop-by-hop names are not. */
function trailersOf(t: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const k in t) if (k.charCodeAt(0) !== 58 && t[k] !== undefined) out[k] = t[k];
  return out;
}

/**
 * Forwards f.req to origin+path over HTTP/2 and streams the answer (and its trailers, to an HTTP/2 client)
 * into f.res; f.done(f) when it is over. Never throws.
 */
export function forwardH2(up: H2Upstreams, origin: string, path: string, f: Forwarding, tls?: UpstreamTls): void {
  const { req, res } = f;
  const h2client = req.httpVersionMajor === 2;
  const grpc = isGrpc(req);
  const hasBody = h2client
    ? !(req as unknown as Http2ServerRequest).stream.endAfterHeaders
    : req.headers['content-length'] !== undefined
      ? req.headers['content-length'] !== '0'
      : req.headers['transfer-encoding'] !== undefined;
  f.status = 502;
  // name/value pairs, as node:http2 takes them without copying them into an object first; :authority and
  // :scheme are the session's (node's), X-Forwarded-Host the client's authority (requestHeaders)
  const headers = requestHeaders(req, f.traceparent, f.stripHeader);
  headers.push(':method', req.method ?? 'GET', ':path', path);
  if (req.headers.te === 'trailers') headers.push('te', 'trailers'); // gRPC servers require it

  let over = false;
  let stream: ClientHttp2Stream | undefined;
  let trailers: OutgoingHttpHeaders | undefined;
  const timers: NodeJS.Timeout[] = [];
  let deadlineTimer: LongTimeout | undefined;
  const finish = (): void => {
    if (over) return;
    over = true;
    for (const t of timers) clearTimeout(t);
    if (deadlineTimer !== undefined) clearLongTimeout(deadlineTimer);
    res.removeListener('close', onClientClose);
    f.done(f);
  };
  /**
   * The upstream failed before or while answering: a 502/504 (gRPC: UNAVAILABLE/DEADLINE_EXCEEDED), or the
   * stream cut. `error`: the answer's message (a passed grpc-timeout says `Deadline exceeded`).
   */
  const failed = (
    err: Error,
    status: number,
    error: string = status === 504 ? ERRORS.timeout : ERRORS.upstream,
  ): void => {
    if (over) return;
    if (stream !== undefined && !stream.destroyed) stream.close(NGHTTP2_CANCEL);
    if (!res.headersSent) {
      // before the upstream's response headers: the gateway's own answer (gRPC: trailers-only)
      f.status = status;
      answer(res, status, { error });
    } else if (grpc && status === 504) {
      // the upstream's headers (and maybe messages) were relayed: the status comes as trailers after them
      f.status = 504;
      (res as unknown as Http2ServerResponse).addTrailers({
        'grpc-status': String(GRPC.deadlineExceeded),
        'grpc-message': grpcMessage(ERRORS.deadline),
      });
      res.end();
    } else res.destroy();
    up.opts.onError?.(err, f);
    finish();
  };
  // the client left (its stream reset, its connection gone) before the answer was over: the upstream
  // call is cancelled (RST_STREAM CANCEL); 499 when the answer had not begun, as for HTTP/1.1
  function onClientClose(): void {
    if (over) return;
    if (!res.headersSent) f.status = 499;
    if (stream !== undefined && !stream.destroyed) stream.close(NGHTTP2_CANCEL);
    finish();
  }
  res.on('close', onClientClose); // on, not once: a response closes once, and once's wrapper costs objects a call

  try {
    stream = up.session(origin, tls).request(headers, { endStream: !hasBody });
  } catch (e) {
    failed(e as Error, 502);
    return;
  }
  const s = stream;
  s.on('error', (e: Error) => failed(e, 502));
  // the call's deadline (grpc-timeout), enforced here too: the upstream may not
  const deadline = grpc ? grpcTimeoutMs(req.headers['grpc-timeout']) : undefined;
  // (a long one, past node's 24.8-day timer bound, as a chain: a plain timer fired it at once)
  if (deadline !== undefined)
    deadlineTimer = setLongTimeout(
      () => failed(new Error('grpc-timeout passed'), 504, ERRORS.deadline),
      Math.max(1, deadline),
    );
  timers.push(
    setTimeout(() => {
      if (!res.headersSent) failed(new Error('no response headers within upstream_timeout'), 504);
    }, up.opts.timeoutMs),
  );
  if (hasBody) req.pipe(s);

  s.on('response', (h: IncomingHttpHeaders, flags: number) => {
    if (over) return;
    const status = Number(h[':status']);
    if (status < 200) return;
    f.status = status;
    delete h[':status'];
    const out = responseHeaders(h, f.rateLimit, status);
    const trailersOnly = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
    if (trailersOnly && h2client) {
      // a trailers-only answer (a gRPC error) stays one HEADERS frame that ends the stream
      writeHeadH2(res, status, out, { endStream: true });
      finish();
      return;
    }
    // to an HTTP/2 client, the trailers (if any) follow the body (the 'end' below)
    if (h2client) writeHeadH2(res, status, out, { waitForTrailers: true });
    else res.writeHead(status, out);
  });
  s.on('data', (chunk: Buffer) => {
    if (over) return;
    if (res.write(chunk)) return;
    s.pause();
    res.once('drain', () => s.resume());
  });
  s.on('trailers', (t: IncomingHttpHeaders) => {
    trailers = trailersOf(t);
  });
  s.on('end', () => {
    if (over) return;
    if (trailers !== undefined && h2client) (res as unknown as Http2ServerResponse).addTrailers(trailers);
    res.end();
    finish();
  });
  s.on('close', () => {
    // reset by the upstream (RST_STREAM) or its session gone before the end
    if (!over) failed(new Error(`upstream stream closed (code ${s.rstCode ?? 'none'})`), 502);
  });
}
