/**
 * Streaming reverse proxy to the upstream over undici Pools (keep-alive, one Pool per origin).
 * Hop-by-hop headers are dropped, X-Forwarded-* added, upstream X-RateLimit-* replaced by ours.
 */
import type { IncomingMessage, ServerResponse, OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { EventEmitter } from 'node:events';
import { Pool, errors, streamTo } from '../../lib/http/undici.js';
import type { HeaderNumbers } from '../engine/types.js';
import { ERRORS, rateLimitHeaders, sendJson } from './respond.js';
const { EventEmitter: Emitter } = process.getBuiltinModule('node:events');

const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'trailers',
  'transfer-encoding', 'upgrade', 'host', 'http2-settings',
]);

export interface UpstreamOptions {
  timeoutMs: number;
}

export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  constructor(private readonly opts: UpstreamOptions) {}

  pool(origin: string): Pool {
    let p = this.pools.get(origin);
    if (!p) {
      p = new Pool(origin, {
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      this.pools.set(origin, p);
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

function requestHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const h = req.headers;
  const named = connectionTokens(h.connection);
  const out: Record<string, string | string[]> = {};
  for (const k in h) {
    const v = h[k];
    if (v === undefined || HOP_BY_HOP.has(k) || (named !== undefined && named.has(k))) continue;
    out[k] = v;
  }
  const ip = req.socket.remoteAddress ?? '';
  const prior = h['x-forwarded-for'];
  out['x-forwarded-for'] = prior ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${ip}` : ip;
  out['x-forwarded-proto'] = (h['x-forwarded-proto'] as string | undefined) ?? 'http';
  if (h.host) out['x-forwarded-host'] = (h['x-forwarded-host'] as string | undefined) ?? h.host;
  return out;
}

/** The upstream's headers minus hop-by-hop and X-RateLimit-*, plus ours (rateLimitHeaders). */
function responseHeaders(raw: Record<string, string | string[] | undefined>, rl: HeaderNumbers | undefined): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const named = connectionTokens(raw.connection ?? raw.Connection);
  for (const k in raw) {
    const v = raw[k];
    if (v === undefined) continue;
    const lk = k.toLowerCase();
    if (HOP_BY_HOP.has(lk) || (named !== undefined && named.has(lk)) || lk.startsWith('x-ratelimit-')) continue;
    out[lk] = v;
  }
  return rateLimitHeaders(rl, undefined, out);
}

/**
 * The abort signal of the upstream requests of one client connection: it fires when the connection
 * closes, which is when a response can close before it is finished (the client went away), and aborts
 * what is still in flight upstream. undici takes an EventEmitter as the signal (far cheaper than an
 * AbortController, an EventTarget; it must not carry an `aborted` property, or undici would treat it as a
 * native signal) and removes its listener when a request completes. One per connection, not per request:
 * no emitter, closure or 'close' listener is allocated per request on a keep-alive connection.
 */
const connectionSignals = new WeakMap<Socket, EventEmitter>();
function clientGoneSignal(req: IncomingMessage): EventEmitter {
  const socket = req.socket;
  let gone = connectionSignals.get(socket);
  if (!gone) {
    const emitter = (gone = new Emitter());
    emitter.setMaxListeners(0); // one listener per request in flight (pipelined requests)
    connectionSignals.set(socket, emitter);
    socket.once('close', () => emitter.emit('abort'));
  }
  return gone;
}

/** One forwarded request: what forward() needs and what it reports (the gateway's per-request object). */
export interface Forwarding {
  req: IncomingMessage;
  res: ServerResponse;
  /** Our X-RateLimit-* numbers for the response (undefined: none). */
  rateLimit: HeaderNumbers | undefined;
  /** The answer's status: the upstream's, or 502 / 504 when it failed. */
  status: number;
  /** Called once the exchange is over (response ended, or failed and answered). */
  done(f: Forwarding): void;
}

/** undici calls this with the upstream's status and headers; the response body streams into res. */
function startResponse({ statusCode, headers, opaque }: { statusCode: number; headers: Record<string, string | string[] | undefined>; opaque: unknown }): ServerResponse {
  const f = opaque as Forwarding;
  f.status = statusCode;
  f.res.writeHead(statusCode, responseHeaders(headers, f.rateLimit));
  return f.res;
}

function finished(err: Error | null, data: { opaque: unknown }): void {
  const f = data.opaque as Forwarding;
  if (err) {
    const { res } = f;
    if (!res.headersSent) {
      const timeout = err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError;
      f.status = timeout ? 504 : 502;
      sendJson(res, f.status, { error: timeout ? ERRORS.timeout : ERRORS.upstream });
    } else {
      res.destroy();
    }
  }
  f.done(f);
}

/**
 * Forwards f.req to origin+path and streams the answer into f.res; f.done(f) when it is over. Never
 * throws. undici's callback form with `opaque`: no promise, async frame or closure per request.
 */
export function forward(upstreams: Upstreams, origin: string, path: string, f: Forwarding): void {
  const { req } = f;
  const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
  f.status = 502;
  streamTo(
    upstreams.pool(origin),
    {
      path,
      method: (req.method ?? 'GET') as 'GET',
      headers: requestHeaders(req),
      body: hasBody ? req : null,
      signal: clientGoneSignal(req),
      opaque: f,
    },
    startResponse,
    finished,
  );
}
