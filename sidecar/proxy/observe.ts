/**
 * Per-request observation beside the proxy (docs/contract.md#observability): the server span (OpenTelemetry) and the access
 * log line. Built only when one of them is on; the gateway then calls begin() once per request and the
 * rest happens when the response closes. Without it the gateway only sends a traceparent upstream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Attributes, Span } from '@opentelemetry/api';
import type { Tracing } from '../../lib/trace/otel.js';
import {
  childTraceparent,
  formatTraceparent,
  newSpanId,
  newTraceId,
  sampledOf,
  traceIdOf,
  validTraceparent,
} from '../../lib/trace/trace-context.js';
import type { Verdict } from '../engine/types.js';
import { type AccessDecision, type AccessLog } from './access-log.js';
import { connectionOf } from '../../lib/http/connection.js';

/** What the gateway knows of a request, read when its response closes. */
export interface Observed {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Normalised path without the query. */
  urlPath: string;
  /** The API the path routed to (undefined: none, a 404). */
  api: { api_id: string; listenPath: string } | undefined;
  keyHash?: string;
  /**
   * The answer's status once the upstream exchange set it (0: answered by the gateway itself); a response
   * that closes before its answer began is 499 whatever this says.
   */
  status: number;
  /** The limiter engine's verdict (undefined: no decision was reached). */
  decision: Verdict['kind'] | undefined;
  /** Milliseconds the upstream exchange took (-1: not forwarded). */
  upstreamMs: number;
  /** The traceparent sent upstream (undefined until one is needed). */
  traceparent: string | undefined;
  /** The recording server span (undefined: none, or not sampled). */
  span: Span | undefined;
  /** performance.now() when the observer began the request (set by begin()). */
  began: number;
  /**
   * The client address, read by begin() while the connection is there (a client that left has no socket by
   * the time its response closes); '' until then.
   */
  clientAddress: string;
}

export interface RequestObserver {
  begin(x: Observed): void;
  /** A child span for a wait on the shared store, ended when `p` settles (only for a recording span). */
  storeWait(x: Observed, p: Promise<unknown>, name: string): void;
}

const DECISIONS: Record<Verdict['kind'], AccessDecision> = {
  allow: 'allow',
  api_limited: 'api_limited',
  key_limited: 'key_limited',
  quota_exceeded: 'quota',
  disallowed: 'auth',
  unavailable: 'unavailable',
};

/** The access log's decision: the engine's, or `auth` for a key refused before it (401/403). */
export function decisionOf(x: Observed, status: number): AccessDecision {
  if (x.decision !== undefined) return DECISIONS[x.decision];
  return status === 401 || status === 403 ? 'auth' : 'allow';
}

/**
 * `server.address` and `server.port` of a Host header: an IPv6 literal without its brackets; a port only when
 * it is one (1–65535 in digits), as a client writes whatever it likes there.
 */
export function hostOf(host: string): { address: string; port: number | undefined } {
  const close = host.startsWith('[') ? host.indexOf(']') : -1;
  const colon = close >= 0 ? (host.charCodeAt(close + 1) === 58 /* : */ ? close + 1 : -1) : host.lastIndexOf(':');
  const address = close >= 0 ? host.slice(1, close) : colon > 0 ? host.slice(0, colon) : host;
  if (colon <= 0) return { address, port: undefined };
  const digits = host.slice(colon + 1);
  const port = /^\d{1,5}$/.test(digits) ? Number(digits) : 0;
  return { address, port: port >= 1 && port <= 65535 ? port : undefined };
}

/** The methods HTTP semantic conventions name; any other is `_OTHER`, its own name in `http.request.method_original`. */
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

/** The protocol of a request as the access log writes it: `1.1`, `2`, or `grpc` (a gRPC call over HTTP/2). */
export function protocolOf(req: IncomingMessage): string {
  if (req.httpVersionMajor !== 2) return '1.1';
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.startsWith('application/grpc') ? 'grpc' : '2';
}

const OBSERVED = Symbol('gw.observed');
type Watched = ServerResponse & { [OBSERVED]?: Observed };

export function createObserver(o: {
  tracing?: Tracing;
  accessLog?: AccessLog;
  /** The client address of a request (trusted_proxies applied); default: the TCP peer. */
  clientIp?: (req: IncomingMessage) => string;
}): RequestObserver | undefined {
  const { tracing, accessLog } = o;
  const clientIp = o.clientIp ?? ((req: IncomingMessage) => connectionOf(req)?.remoteAddress ?? '');
  if (!tracing && !accessLog) return undefined;

  // one listener function for every response (no closure or once-wrapper per request): the response
  // carries its Observed under a symbol
  function onClose(this: ServerResponse): void {
    const x = (this as Watched)[OBSERVED];
    if (x === undefined) return;
    try {
      end(x, x.began);
    } catch {
      // an observation never takes the gateway down: a response event has no caller to report to
    }
  }

  function end(x: Observed, t0: number): void {
    // a response closed before its answer began: the client left first (its connection closed, its stream
    // reset) while the request waited for a decision or for the upstream — 499, nginx's "client closed
    // request", as the forwarding counts it (upstream.ts, upstream-h2.ts). A tunnel's 101 went out on the
    // raw socket, not through the response.
    const status = !x.res.headersSent && x.status !== 101 ? 499 : x.status !== 0 ? x.status : x.res.statusCode;
    const decision = decisionOf(x, status);
    const { span } = x;
    if (span !== undefined) {
      span.setAttribute('http.response.status_code', status);
      span.setAttribute('gw.rate_limit.decision', decision);
      if (status >= 500) {
        // a server span's error: its status code (HTTP semantic conventions, error.type)
        span.setAttribute('error.type', String(status));
        span.setStatus({ code: 2 /* ERROR */ });
      }
      span.end();
    }
    if (accessLog !== undefined) {
      accessLog.write({
        api_id: x.api?.api_id ?? '',
        method: x.method,
        path: x.urlPath,
        status,
        latency_ms: performance.now() - t0,
        upstream_latency_ms: x.upstreamMs < 0 ? null : x.upstreamMs,
        decision,
        key: x.keyHash !== undefined ? x.keyHash.slice(0, 8) : null,
        trace_id: x.traceparent !== undefined ? traceIdOf(x.traceparent) : '',
        client_ip: x.clientAddress,
        protocol: protocolOf(x.req),
      });
    }
  }

  return {
    begin(x) {
      const t0 = performance.now();
      const h = x.req.headers;
      if (accessLog !== undefined) x.clientAddress = clientIp(x.req);
      const incoming = h.traceparent;
      const parented = validTraceparent(incoming);
      if (tracing !== undefined && !(parented ? sampledOf(incoming) : tracing.sampleRoot())) {
        // not recorded: no span is built; the next hop continues the trace, unsampled
        x.traceparent = parented ? childTraceparent(incoming) : formatTraceparent(newTraceId(), newSpanId(), false);
      } else if (tracing !== undefined) {
        const { address, port } = hostOf(h.host ?? (h[':authority'] as string | undefined) ?? '');
        const known = KNOWN_METHODS.has(x.method);
        const attributes: Attributes = {
          'http.request.method': known ? x.method : '_OTHER',
          'url.path': x.urlPath,
          'url.scheme': (connectionOf(x.req) as { encrypted?: boolean } | null)?.encrypted === true ? 'https' : 'http',
          'server.address': address,
          'client.address': (x.clientAddress ||= clientIp(x.req)),
          'network.protocol.version': x.req.httpVersionMajor === 2 ? '2' : x.req.httpVersion,
          'gw.api_id': x.api?.api_id ?? '',
        };
        if (port !== undefined) attributes['server.port'] = port;
        if (!known) attributes['http.request.method_original'] = x.method;
        if (x.api !== undefined) attributes['http.route'] = x.api.listenPath;
        const ua = h['user-agent'];
        if (ua !== undefined) attributes['user_agent.original'] = ua;
        const method = known ? x.method : 'HTTP';
        const name = x.api !== undefined ? `${method} ${x.api.listenPath}` : method;
        const span = tracing.startServer(name, incoming, h.tracestate, attributes);
        x.traceparent = tracing.traceparentOf(span);
        if (span.isRecording()) x.span = span;
      } else {
        x.traceparent = childTraceparent(incoming);
      }
      // an unsampled request without access logs: nothing to do when its response closes
      if (x.span === undefined && accessLog === undefined) return;
      x.began = t0;
      (x.res as Watched)[OBSERVED] = x;
      x.res.on('close', onClose);
    },
    storeWait(x, p, name) {
      if (tracing === undefined || x.span === undefined) return;
      const child = tracing.startChild(name, x.span);
      const done = (): void => child.end();
      p.then(done, done);
    },
  };
}
