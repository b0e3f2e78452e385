/** JSON error bodies and the X-RateLimit-* / Retry-After headers of docs/contract.md#responses. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import type { HeaderNumbers } from '../engine/types.js';
import { PLAIN_JSON, sendJson } from '../../lib/http/http-util.js';

/** A gRPC call: HTTP/2 with `content-type: application/grpc…` (`+proto`, `+json`…). */
export function isGrpc(req: IncomingMessage): boolean {
  if (req.httpVersionMajor !== 2) return false;
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.startsWith('application/grpc');
}

/** gRPC status codes the gateway answers with (grpc/doc/statuscodes.md). */
export const GRPC = {
  deadlineExceeded: 4,
  permissionDenied: 7,
  resourceExhausted: 8,
  unimplemented: 12,
  internal: 13,
  unavailable: 14,
  unauthenticated: 16,
} as const;

/**
 * The gRPC status of an answer the gateway gives itself (the table in docs/proxy.md, "gRPC"): limits and
 * quotas → RESOURCE_EXHAUSTED, no key → UNAUTHENTICATED, a key refused → PERMISSION_DENIED.
 */
export function grpcStatusOf(status: number, error: unknown): number {
  switch (status) {
    case 429:
    case 413:
      return GRPC.resourceExhausted;
    case 401:
      return GRPC.unauthenticated;
    case 403:
      return error === ERRORS.quota ? GRPC.resourceExhausted : GRPC.permissionDenied;
    case 404:
    case 405:
      return GRPC.unimplemented;
    case 502:
    case 503:
      return GRPC.unavailable;
    case 504:
      return GRPC.deadlineExceeded;
    default:
      return GRPC.internal;
  }
}

/** A grpc-message value: percent-encoded outside printable ASCII, and `%` itself (the gRPC HTTP/2 protocol). */
export function grpcMessage(s: string): string {
  return s.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

/**
 * A gRPC answer of the gateway's own: HTTP 200, trailers-only (one HEADERS frame that ends the stream)
 * with grpc-status, grpc-message and the answer's other headers (retry-after, X-RateLimit-*).
 */
function sendGrpc(res: Http2ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
  const error = (body as { error?: unknown } | null)?.error;
  const message = typeof error === 'string' ? error : `HTTP ${status}`;
  const { stream } = res;
  if (stream.destroyed || stream.headersSent) {
    if (!stream.destroyed) stream.close();
    return;
  }
  stream.respond(
    {
      ...headers,
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-status': String(grpcStatusOf(status, error)),
      'grpc-message': grpcMessage(message),
    },
    { endStream: true },
  );
}

/**
 * The gateway's own answer (a refusal, a health probe, a failed upstream): to a gRPC call a trailers-only
 * gRPC status, else JSON (lib/http/http-util.ts `sendJson`).
 */
export function answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const { req } = res as { req?: IncomingMessage };
  if (req !== undefined && req.httpVersionMajor === 2 && isGrpc(req))
    return sendGrpc(res as unknown as Http2ServerResponse, status, body, headers);
  sendJson(res, status, body, headers, PLAIN_JSON);
}

/** Sets X-RateLimit-* (and Retry-After) into `out` — a new object by default, or a response's header object. */
export function rateLimitHeaders<T extends Record<string, unknown> = Record<string, string>>(
  h: HeaderNumbers | undefined,
  retryAfter?: number,
  out: T = {} as T,
): T {
  const o = out as Record<string, unknown>;
  if (h) {
    o['x-ratelimit-limit'] = String(h.limit);
    o['x-ratelimit-remaining'] = String(Math.max(0, h.remaining));
    o['x-ratelimit-reset'] = String(h.reset);
  }
  if (retryAfter !== undefined) o['retry-after'] = String(Math.max(1, Math.ceil(retryAfter)));
  return out;
}

export const ERRORS = {
  notFound: 'Not Found',
  authMissing: 'Authorization field missing',
  disallowed: 'Access to this API has been disallowed',
  apiLimited: 'API Rate Limit Exceeded',
  keyLimited: 'Rate Limit Exceeded',
  quota: 'Quota exceeded',
  upstream: 'There was a problem proxying the request',
  timeout: 'Upstream request timed out',
  /** a gRPC call's `grpc-timeout` passed (docs/proxy.md, "gRPC") */
  deadline: 'Deadline exceeded',
  sessionStore: 'Session store unavailable',
  rateLimiterUnavailable: 'Rate limiter unavailable',
} as const;
