/** JSON error bodies and the X-RateLimit-* / Retry-After headers of docs/contract.md#responses. */
import type { ServerResponse } from 'node:http';
import type { HeaderNumbers } from '../engine/types.js';

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
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
  sessionStore: 'Session store unavailable',
  rateLimiterUnavailable: 'Rate limiter unavailable',
} as const;
