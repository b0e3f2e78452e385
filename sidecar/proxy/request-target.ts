/**
 * The request target as the gateway reads it: origin-form, and refused with a 400 when it holds what an
 * upstream would read differently from the gateway (a fragment; with strict_paths the forms of
 * lib/request-path.ts `strictPathProblem`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { strictPathProblem } from '../../lib/request-path.js';
import type { Gateway } from './gateway.js';
import { answer, isGrpc } from './respond.js';

/** The request's target in origin-form: absolute-form (`GET http://host/path`, RFC 9112 §3.2.2, which a server must accept) → its path. */
export function requestTarget(req: IncomingMessage): string {
  const url = req.url ?? '/';
  return url.charCodeAt(0) !== 47 /* / */ ? originFormOf(url) : url;
}

/** `http://host:port/p?q` → `/p?q` (`/` when it has no path); anything else unchanged (`*`: no API). */
function originFormOf(url: string): string {
  const m = /^https?:\/\/[^/?#]*/i.exec(url);
  if (!m) return url;
  const rest = url.slice(m[0].length);
  return rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
}

/** Answers 400 (and returns true) for a target the gateway does not serve; `rawPath` is `url` without its query. */
export function refuseTarget(gw: Gateway, res: ServerResponse, url: string, rawPath: string): boolean {
  // a fragment never belongs in a request target (RFC 9112 §3.2); an upstream's URL parser cuts it,
  // so `/users#x` would be served as `/users` past the limits of `/users` (docs/proxy.md)
  if (url.indexOf('#') !== -1) {
    gw.metrics.request('', 400);
    answer(res, 400, { error: 'Bad request path: a fragment (#) is not accepted in a request target' });
    return true;
  }
  if (gw.strictPaths) {
    const problem = strictPathProblem(rawPath);
    if (problem !== undefined) {
      gw.metrics.request('', 400);
      answer(res, 400, { error: `Bad request path: ${problem}` });
      return true;
    }
  }
  return false;
}

/** The methods node:http's parser takes over HTTP/1.1 (upper case: methods are case-sensitive). */
const HTTP1_METHODS = new Set(process.getBuiltinModule('node:http').METHODS);

/**
 * Methods over HTTP/2, which carries any token in `:method` where HTTP/1.1's parser takes a known method
 * only (400 for another):
 * - one HTTP/1.1 would refuse (`trace`, `get`, `FOO`) is refused the same (400): it went upstream as sent,
 *   past the TRACE refusal (own-answers.ts) and matching no endpoint rule, to an upstream that may read
 *   it case-insensitively;
 * - a gRPC call that is not a POST (gRPC over HTTP/2 is POST only): UNIMPLEMENTED (405), as grpc-go
 *   answers it. A rule or a key's per-method limit written for POST would not have matched it, while a
 *   gRPC server such as grpc-js serves the call whatever its method: a way past those limits.
 */
export function refuseMethod(gw: Gateway, req: IncomingMessage, res: ServerResponse): boolean {
  if (req.httpVersionMajor !== 2) return false;
  const method = req.method ?? '';
  if (!HTTP1_METHODS.has(method)) {
    gw.metrics.request('', 400);
    answer(res, 400, { error: 'Bad request: unknown method' });
    return true;
  }
  if (method === 'POST' || !isGrpc(req)) return false;
  gw.metrics.request('', 405);
  answer(res, 405, { error: 'Method Not Allowed: a gRPC call is a POST' }, { allow: 'POST' });
  return true;
}
