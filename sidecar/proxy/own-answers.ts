/**
 * What the gateway answers itself, before any API is looked at: the health paths (docs/contract.md#health-and-readiness,
 * GET and HEAD only) and the requests HTTP itself refuses (no Host, more than one Host, a Host other than :authority, TRACE). The order
 * is part of the contract: /healthz answers whatever the Host fields say, /readyz only a valid request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Gateway } from './gateway.js';
import { answer } from './respond.js';

/** How many Host fields a request's raw header list holds (names at even indices). */
function hostCount(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!;
    if (k.length === 4 && k.toLowerCase() === 'host') n++;
  }
  return n;
}

/** Answers (and returns true) a request the gateway serves itself or refuses before routing; `urlPath` is normalised. */
export function answerOwn(gw: Gateway, req: IncomingMessage, res: ServerResponse, urlPath: string): boolean {
  // the health paths answer GET and HEAD, 405 otherwise
  if ((urlPath === '/healthz' || urlPath === '/readyz') && req.method !== 'GET' && req.method !== 'HEAD') {
    answer(res, 405, { error: 'Method Not Allowed' }, { allow: 'GET, HEAD' });
    return true;
  }
  if (urlPath === '/healthz') {
    answer(res, 200, { status: 'ok', ...gw.deps.health?.() });
    return true;
  }
  // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (node's own check is off to answer in JSON)
  if (req.headers.host === undefined && req.httpVersionMinor === 1 && req.httpVersionMajor === 1) {
    answer(res, 400, { error: 'Host header missing' });
    return true;
  }
  // and more than one Host is a 400 in any HTTP/1.x request: node keeps the first, an upstream or a
  // cache in front may read the other (one pass over rawHeaders, only when Host is present)
  if (req.headers.host !== undefined && req.httpVersionMajor === 1 && hostCount(req.rawHeaders) > 1) {
    answer(res, 400, { error: 'more than one Host header' });
    return true;
  }
  // over HTTP/2 a Host beside :authority must name the same (RFC 9113 §8.3.1): the gateway routes and counts
  // by one, an upstream or a cache may read the other, as with two Host fields over HTTP/1.1
  if (req.httpVersionMajor === 2 && req.headers.host !== undefined) {
    const authority = req.headers[':authority'];
    if (typeof authority === 'string' && authority.toLowerCase() !== req.headers.host.toLowerCase()) {
      answer(res, 400, { error: 'Host differs from :authority' });
      return true;
    }
  }
  // TRACE would echo the request's credentials and cookies back (cross-site tracing): refused, as nginx does
  if (req.method === 'TRACE') {
    answer(res, 405, { error: 'Method Not Allowed' }, { allow: 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS' });
    return true;
  }
  if (urlPath === '/readyz') {
    const ok = gw.deps.ready();
    answer(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not ready' });
    return true;
  }
  return false;
}
