/**
 * Streaming reverse proxy to the upstream over undici Pools (keep-alive, one Pool per origin).
 * Hop-by-hop headers are dropped, X-Forwarded-* added, upstream X-RateLimit-* replaced by ours.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Pool, errors, type Dispatcher } from '../../lib/http/undici.js';
import type { HeaderNumbers } from '../engine/types.js';
import { ERRORS, answer } from './respond.js';
import { boundedTracestate, validTraceparent } from '../../lib/trace/trace-context.js';
import type { Http2ServerRequest, Http2ServerResponse, OutgoingHttpHeaders } from 'node:http2';
import type { UpstreamTls } from './upstream-tls.js';
import { UPSTREAM_POOL } from '../../lib/tuning.js';
import { connectionOf } from '../../lib/http/connection.js';

// `expect` too: node:http has already answered the client's `Expect: 100-continue` (and undici refuses
// the header), so the upstream gets the request with its body, as from nginx
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'trailers',
  'transfer-encoding',
  'upgrade',
  'host',
  'http2-settings',
  'expect',
]);

export interface UpstreamOptions {
  timeoutMs: number;
  /** An upstream call that failed (answered 502/504, or the response cut): for the log. */
  onError?: (err: Error, f: Forwarding) => void;
}

export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  readonly onError: UpstreamOptions['onError'];
  constructor(private readonly opts: UpstreamOptions) {
    this.onError = opts.onError;
  }

  /** The pool of `origin` (with `tls`: of that origin with those TLS options). */
  pool(origin: string, tls?: UpstreamTls): Pool {
    const id = tls === undefined ? origin : `${origin}\0${tls.key}`;
    let p = this.pools.get(id);
    if (!p) {
      // no cap on connections (undici's default), as nginx: a capped pool queues requests with no
      // deadline (undici's timers start on the socket), so long-lived responses (SSE, long polls, slow
      // downloads) would hold every other request of the pod
      p = new Pool(origin, {
        ...UPSTREAM_POOL,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
        ...(tls !== undefined ? { connect: tls.opts } : {}),
        // an https:// upstream is offered h2 by ALPN (docs/proxy.md, "Upstreams"); one that does not
        // select it is spoken to over HTTP/1.1
        ...(origin.startsWith('https:') ? { allowH2: true } : {}),
      });
      this.pools.set(id, p);
    }
    return p;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

/** Tokens of a Connection header other than keep-alive / close (headers the sender marks hop-by-hop). */
function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (!value) return undefined;
  const v = Array.isArray(value) ? value.join(',') : value;
  if (v === 'keep-alive' || v === 'close' || v === 'Keep-Alive' || v === 'Close') return undefined; // the usual case
  let out: Set<string> | undefined;
  for (const t of v.split(',')) {
    const h = t.trim().toLowerCase();
    if (h && h !== 'keep-alive' && h !== 'close') (out ??= new Set()).add(h);
  }
  return out;
}

/** How requestHeaders treats a client header: dropped (hop-by-hop), or replaced by the gateway's own. */
const enum Client {
  HopByHop = 1,
  Forwarded = 2,
  Traceparent = 3,
  Tracestate = 4,
}
const CLIENT_HEADER = new Map<string, Client>([
  ...[...HOP_BY_HOP].map((k): [string, Client] => [k, Client.HopByHop]),
  ['x-forwarded-for', Client.Forwarded],
  ['x-forwarded-proto', Client.Forwarded],
  ['x-forwarded-host', Client.Forwarded],
  ['traceparent', Client.Traceparent],
  ['tracestate', Client.Tracestate],
]);

/**
 * The headers sent upstream, as name/value pairs in one flat array (undici's and node's cheapest form: no
 * object built and walked again): the client's minus hop-by-hop, plus X-Forwarded-*; `traceparent` (W3C,
 * this hop as the parent) replaces the client's; `strip` (strip_auth_data: the API's auth header, lower
 * case) is not sent.
 */
export function requestHeaders(req: IncomingMessage, traceparent?: string, strip?: string): string[] {
  const h = req.headers;
  const named = connectionTokens(h.connection);
  const out: string[] = [];
  for (const k in h) {
    const v = h[k];
    if (v === undefined || (named !== undefined && named.has(k)) || k === strip) continue;
    const kind = CLIENT_HEADER.get(k);
    if (kind === Client.HopByHop || kind === Client.Forwarded) continue;
    if (kind === undefined && k.charCodeAt(0) === 58 /* : */) continue; // HTTP/2 pseudo-headers
    if (traceparent !== undefined) {
      if (kind === Client.Traceparent) continue; // ours replaces it
      // a tracestate belongs to the trace of its traceparent: dropped when that one was not continued
      if (kind === Client.Tracestate && !validTraceparent(h.traceparent)) continue;
    }
    if (kind === Client.Tracestate) {
      const bounded = boundedTracestate(v);
      if (bounded !== undefined) out.push(k, bounded);
    } else if (typeof v === 'string') out.push(k, v);
    else for (const one of v) out.push(k, one);
  }
  const conn = connectionOf(req);
  const ip = conn?.remoteAddress ?? '';
  const prior = forwardedFor(h['x-forwarded-for']);
  out.push('x-forwarded-for', prior ? `${prior}, ${ip}` : ip);
  // an empty value is no value: the gateway's own then
  const proto = (conn as { encrypted?: boolean } | null)?.encrypted === true ? 'https' : 'http';
  out.push('x-forwarded-proto', (h['x-forwarded-proto'] as string | undefined) || proto);
  // HTTP/2 names the authority :authority
  const host = h.host ?? (h[':authority'] as string | undefined);
  if (host) out.push('x-forwarded-host', (h['x-forwarded-host'] as string | undefined) || host);
  if (traceparent !== undefined) out.push('traceparent', traceparent);
  return out;
}

/**
 * The client's X-Forwarded-For without empty elements (an empty line, `a, , b`), '' for none; node:http has
 * joined several lines with ", ".
 */
function forwardedFor(v: string | string[] | undefined): string {
  if (v === undefined) return '';
  const s = Array.isArray(v) ? v.join(', ') : v;
  if (s !== '' && !EMPTY_ELEMENT.test(s)) return s; // the usual case: nothing to drop
  return s
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .join(', ');
}
const EMPTY_ELEMENT = /(?:^|,)\s*(?:,|$)/;

const NO_TRAILERS = { waitForTrailers: false } as const;

/**
 * The response head to an HTTP/2 client (`res` of node:http2's compatibility API), `pairs` as
 * responseHeaders makes them, straight onto its stream: the compatibility API's writeHead copies and
 * checks every header into an object of its own before node:http2 checks them again, and always asks
 * for trailers. `waitForTrailers`: trailers set later with res.addTrailers are sent after the body
 * (res.end()); without it the body's last frame ends the stream. A stream already gone is left alone
 * (as writeHead does).
 */
export function writeHeadH2(
  res: ServerResponse,
  status: number,
  pairs: (string | string[])[],
  o: { endStream?: boolean; waitForTrailers?: boolean },
): void {
  const { stream } = res as unknown as Http2ServerResponse;
  if (stream.destroyed || stream.closed) return;
  pairs.push(':status', String(status));
  stream.respond(pairs as unknown as OutgoingHttpHeaders, o);
}

/**
 * Header pairs (requestHeaders, responseHeaders) as an object; repeated names become arrays. No prototype:
 * a header named `constructor` or `__proto__` is a header like any other.
 */
export function headerObject(pairs: readonly (string | string[])[]): Record<string, string | string[]> {
  const out = Object.create(null) as Record<string, string | string[]>;
  for (let i = 0; i < pairs.length; i += 2) {
    const k = pairs[i] as string;
    const v = pairs[i + 1]!;
    const prior = out[k];
    out[k] = prior === undefined ? v : ([] as string[]).concat(prior, v);
  }
  return out;
}

/**
 * The response headers as name/value pairs: the upstream's (names lower-case, as undici and node:http
 * parse them) minus hop-by-hop and X-RateLimit-*, plus ours (docs/contract.md#responses). A 204 or a 1xx (a 101) has no
 * body, so no length (RFC 9110 §8.6): an upstream's is dropped.
 */
export function responseHeaders(
  raw: Record<string, string | string[] | undefined>,
  rl: HeaderNumbers | undefined,
  statusCode = 200,
): (string | string[])[] {
  const out: (string | string[])[] = [];
  const named = connectionTokens(raw.connection);
  for (const k in raw) {
    const v = raw[k];
    if (v === undefined || HOP_BY_HOP.has(k) || (named !== undefined && named.has(k))) continue;
    if (k.charCodeAt(0) === 120 /* x */ && k.startsWith('x-ratelimit-')) continue;
    if ((statusCode === 204 || statusCode < 200) && k === 'content-length') continue;
    out.push(k, v);
  }
  if (rl !== undefined)
    out.push(
      'x-ratelimit-limit',
      String(rl.limit),
      'x-ratelimit-remaining',
      String(Math.max(0, rl.remaining)),
      'x-ratelimit-reset',
      String(rl.reset),
    );
  return out;
}

/** One forwarded request: what forward() needs and what it reports (the gateway's per-request object). */
export interface Forwarding {
  req: IncomingMessage;
  res: ServerResponse;
  /** Our X-RateLimit-* numbers for the response (undefined: none). */
  rateLimit: HeaderNumbers | undefined;
  /** The answer's status: the upstream's, 502 / 504 when it failed, 499 when the client left before it began. */
  status: number;
  /** Called once the exchange is over (response ended, or failed and answered). */
  done(f: Forwarding): void;
  /** W3C traceparent sent upstream in place of the client's (undefined: the client's, if any). */
  traceparent?: string;
  /** A request header not sent upstream: the API's auth header under strip_auth_data (undefined: none). */
  stripHeader?: string;
}

/**
 * The upstream calls in flight on each client connection. When the connection closes (the client went
 * away, or the server destroyed it) they are aborted: undici stops the upstream request and the body
 * stops flowing into a response nobody reads. One Set and one 'close' listener per connection, nothing
 * per request but the add and delete.
 */
const inFlight = new WeakMap<Socket, Set<UpstreamCall>>();
function callsOf(socket: Socket): Set<UpstreamCall> {
  let calls = inFlight.get(socket);
  if (!calls) {
    const set = (calls = new Set());
    inFlight.set(socket, set);
    socket.once('close', () => {
      for (const call of set) call.clientGone();
    });
  }
  return calls;
}

/**
 * undici's handler for one forwarded request (the Dispatcher handler API): the upstream's status and
 * headers become the response's, its body is written through as it arrives, with backpressure (undici
 * pauses reading the upstream while the client's socket is full). Used instead of undici's `stream()`,
 * which wraps every request in an AsyncResource and adds four listeners to the response.
 */
class UpstreamCall implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private gone = false;
  private resume: (() => void) | null = null;
  /** Body bytes still to come by the upstream's Content-Length (-1: not known, chunked or none). */
  private left = -1;
  /** The response was ended with its last chunk (res.end(chunk)): onResponseEnd has nothing to end. */
  private ended = false;
  /** The exchange is over (finish() ran). */
  private over = false;

  constructor(
    private readonly f: Forwarding,
    /** the calls of its client connection (HTTP/1.1), or undefined (HTTP/2: its stream's close aborts it) */
    private readonly calls: Set<UpstreamCall> | undefined,
    private readonly onError: ((err: Error, f: Forwarding) => void) | undefined,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.gone) controller.abort(new errors.RequestAbortedError());
    else this.controller = controller;
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    if (statusCode < 200) return; // 1xx interim answers are not forwarded (node:http sends its own 100-continue)
    const { f } = this;
    f.status = statusCode;
    const cl = headers['content-length'];
    this.left = typeof cl === 'string' && f.req.method !== 'HEAD' ? Number(cl) : -1;
    const out = responseHeaders(headers, f.rateLimit, statusCode);
    // the upstream's reason phrase, as nginx relays it (node would put its own, or "unknown")
    // (HTTP/2 has no reason phrase; nor trailers from an HTTP/1.1 upstream)
    if (f.req.httpVersionMajor === 2) writeHeadH2(f.res, statusCode, out, NO_TRAILERS);
    else if (statusMessage) f.res.writeHead(statusCode, statusMessage, out);
    else f.res.writeHead(statusCode, out);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { res } = this.f;
    if (this.left === chunk.length) {
      // the whole (rest of the) body: headers and body leave in one write, with no separate end() step
      this.left = 0;
      this.ended = true;
      res.end(chunk);
      return;
    }
    if (this.left > 0) this.left -= chunk.length;
    if (res.write(chunk)) return;
    controller.pause();
    res.once('drain', (this.resume ??= () => controller.resume()));
  }

  onResponseEnd(): void {
    if (!this.ended) this.f.res.end();
    this.finish();
  }

  onResponseError(_c: Dispatcher.DispatchController | null, err: Error): void {
    const { f } = this;
    const { res } = f;
    // once the whole body was handed to the response (this.ended), it is left to finish
    if (this.gone && !this.ended) {
      // the client left first: nothing more reaches it. Before the answer began: 499 (nginx's "client closed
      // request"), as the access log and the span say (observe.ts); once it began, the status it was sent
      if (!res.headersSent) f.status = 499;
      if (!res.destroyed) res.destroy();
    } else if (!res.headersSent) {
      const timeout = err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError;
      f.status = timeout ? 504 : 502;
      answer(res, f.status, { error: timeout ? ERRORS.timeout : ERRORS.upstream });
    } else if (!this.ended) {
      res.destroy();
    }
    if (!this.gone) this.onError?.(err, f); // a client that left is not the upstream's failure
    this.finish();
  }

  /** The client connection closed: abort the upstream request (now, or as soon as undici starts it). */
  clientGone(): void {
    if (this.over) return; // an HTTP/2 stream closes after its answer too
    this.gone = true;
    this.controller?.abort(new errors.RequestAbortedError());
  }

  private finish(): void {
    this.over = true;
    this.calls?.delete(this);
    this.f.done(this.f);
  }
}

/**
 * Forwards f.req to origin+path and streams the answer into f.res; f.done(f) when it is over. Never
 * throws: undici reports a request it cannot send to onResponseError.
 */
export function forward(upstreams: Upstreams, origin: string, path: string, f: Forwarding, tls?: UpstreamTls): void {
  const { req } = f;
  const h2 = req.httpVersionMajor === 2;
  // HTTP/2: a body unless the request's HEADERS frame ended its stream
  const hasBody = h2
    ? !(req as unknown as Http2ServerRequest).stream.endAfterHeaders
    : req.headers['content-length'] !== undefined
      ? req.headers['content-length'] !== '0'
      : req.headers['transfer-encoding'] !== undefined;
  f.status = 502;
  // an HTTP/2 stream closes on its own (its answer sent, reset by the client or by the send timeout:
  // protocols.ts), and with its connection: its upstream call is aborted then. req.socket is a proxy made
  // per stream, so the per-connection set would cost a Set, a WeakMap entry and a listener a request
  const calls = h2 ? undefined : callsOf(req.socket);
  const call = new UpstreamCall(f, calls, upstreams.onError);
  // on, not once: a response closes once, and once's wrapper is two more objects a request
  if (calls === undefined) f.res.on('close', () => call.clientGone());
  else calls.add(call);
  upstreams.pool(origin, tls).dispatch(
    {
      origin,
      path,
      method: (req.method ?? 'GET') as 'GET',
      headers: requestHeaders(req, f.traceparent, f.stripHeader),
      body: hasBody ? req : null,
    },
    call,
  );
}
