/** /healthz, /readyz and /metrics on a process's metrics (or admin) listener. */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { answerClientErrorsWithJson } from './http/client-error.js';
import { buildInfo } from './build-info.js';
import { PLAIN_JSON, sendJson } from './http/http-util.js';
const { createServer } = process.getBuiltinModule('node:http');

/** A JSON answer with its length (the ops endpoints, the webhook). */
export function json(res: ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, body, {}, PLAIN_JSON);
}

/**
 * A process's probes: `ready` answers /readyz; `health` adds to /healthz's body what a process reports
 * without failing its liveness (a gateway's shared store: its readiness never depends on it). The body
 * also names the build (lib/build-info.ts); only these operational listeners say it, never the gateway's
 * public one (a version is a hint to an attacker).
 */
export type Probes = (() => boolean) | { ready: () => boolean; health?: () => Record<string, unknown> };

const probesOf = (p: Probes): { ready: () => boolean; health?: () => Record<string, unknown> } =>
  typeof p === 'function' ? { ready: p } : p;

/** Answers the three operational paths (GET/HEAD; another method on them → 405); returns false for anything else. */
export function handleOps(req: IncomingMessage, res: ServerResponse, registry: Registry, probes: Probes): boolean {
  const path = (req.url ?? '/').split('?')[0];
  if (path !== '/healthz' && path !== '/readyz' && path !== '/metrics') return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    json(res, 405, { error: 'Method Not Allowed' });
    return true;
  }
  const { ready, health } = probesOf(probes);
  if (path === '/healthz') {
    json(res, 200, { status: 'ok', build: buildInfo(), ...health?.() });
    return true;
  }
  if (path === '/readyz') {
    const ok = ready();
    json(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not ready' });
    return true;
  }
  if (path === '/metrics') {
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(text);
      },
      () => json(res, 500, { error: 'metrics unavailable' }),
    );
    return true;
  }
  return false;
}

/**
 * `fallback` serves every other path (the facade's management endpoints); `errorBody` is the JSON body of a
 * request node:http cannot parse (431, 400, 408), in the shape of the endpoints behind it.
 */
export function createOpsServer(
  registry: Registry,
  ready: Probes,
  fallback?: (req: IncomingMessage, res: ServerResponse) => void,
  errorBody: (status: number, reason: string) => unknown = (_status, reason) => ({ error: reason }),
): Server {
  const server = createServer((req, res) => {
    if (handleOps(req, res, registry, ready)) return;
    if (fallback) fallback(req, res);
    else json(res, 404, { error: 'Not Found' });
  });
  answerClientErrorsWithJson(server, errorBody);
  return server;
}
