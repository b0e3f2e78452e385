/**
 * The gateway a request meets (SPEC.md §3.1): route → authenticate → API scope → key scope → quota →
 * proxy. The limiter engine decides; this file turns decisions into HTTP.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '../../lib/logger.js';
import type { Clock } from '../../lib/clock.js';
import type { StoredSession } from '../../lib/sessions.js';
import type { AccessDefinitionT } from '../../crds/schemas/access-definition.js';
import type { CompiledConfig } from '../config/types.js';
import type { Engine, Verdict } from '../engine/types.js';
import type { GatewayMetrics } from '../metrics.js';
import { accessAllowed, extractKey, keyHashOf, sessionUsable } from './auth.js';
import { ERRORS, rateLimitHeaders, sendJson } from './respond.js';
import { route } from './router.js';
import { forward, Upstreams } from './upstream.js';

export interface GatewayDeps {
  config(): CompiledConfig;
  lookupSession(keyHash: string): Promise<StoredSession | undefined>;
  /** Effective access rights of a session (policies applied); an Error when its policies cannot be resolved. */
  accessRights(stored: StoredSession, config: CompiledConfig): Record<string, AccessDefinitionT> | null | undefined | Error;
  engine: Engine;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  /** Sidecar --upstream: overrides every API's target_url. */
  upstreamOverride?: string;
  ready(): boolean;
  upstreamTimeoutMs?: number;
  /** Streaming inputs served under an API's listen path (streams/); false = not a stream path. */
  streams?: { tryHandle(apiId: string, relPath: string, req: IncomingMessage, res: ServerResponse): boolean };
}

function refusal(v: Exclude<Verdict, { kind: 'allow' }>): { status: number; error: string; scope: string } {
  switch (v.kind) {
    case 'api_limited':
      return { status: 429, error: ERRORS.apiLimited, scope: 'api' };
    case 'key_limited':
      return { status: 429, error: ERRORS.keyLimited, scope: 'key' };
    case 'quota_exceeded':
      return { status: 403, error: ERRORS.quota, scope: 'quota' };
  }
}

/** Parsed upstream targets (origin and base path), so a URL is not parsed on every request. */
const targets = new Map<string, { origin: string; basePath: string }>();
function targetOf(url: string): { origin: string; basePath: string } {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    t = { origin: u.origin, basePath: u.pathname.replace(/\/$/, '') };
    if (targets.size > 1000) targets.clear();
    targets.set(url, t);
  }
  return t;
}

const STATUS_CLASS = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

export function createGatewayHandler(deps: GatewayDeps): { handle(req: IncomingMessage, res: ServerResponse): Promise<void>; upstreams: Upstreams } {
  const upstreams = new Upstreams({ timeoutMs: deps.upstreamTimeoutMs ?? 30_000 });
  const { metrics } = deps;
  // labelled metric children per api (and status class), resolved once instead of on every request
  // per api: one child per status class (index status / 100), so no key string is built per request
  const requestCounters = new Map<string, ({ inc(): void } | undefined)[]>();
  const upstreamHistograms = new Map<string, { observe(v: number): void }>();
  const countRequest = (apiId: string, status: number): void => {
    const cls = Math.floor(status / 100);
    let byClass = requestCounters.get(apiId);
    if (!byClass) {
      if (requestCounters.size > 10_000) requestCounters.clear();
      requestCounters.set(apiId, (byClass = []));
    }
    let c = byClass[cls];
    if (!c) {
      const code = STATUS_CLASS[cls] ?? `${cls}xx`;
      c = metrics.requests.labels({ api: apiId, code });
      if (cls >= 0 && cls < STATUS_CLASS.length) byClass[cls] = c;
    }
    c.inc();
  };
  const observeUpstream = (apiId: string, seconds: number): void => {
    let h = upstreamHistograms.get(apiId);
    if (!h) {
      if (upstreamHistograms.size > 10_000) upstreamHistograms.clear();
      upstreamHistograms.set(apiId, (h = metrics.upstream.labels({ api: apiId })));
    }
    h.observe(seconds);
  };

  /** Never rejects: a failure is logged and answered 500 here, so the server needs no catch (a promise and a closure) per request. */
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
      if (path === '/readyz') return sendJson(res, deps.ready() ? 200 : 503, { status: deps.ready() ? 'ready' : 'not ready' });

      const config = deps.config();
      const r = route(config.apis, path);
      if (!r || !r.api.active) return sendJson(res, 404, { error: ERRORS.notFound });
      const { api, relPath } = r;
      const method = (req.method ?? 'GET').toUpperCase();

      let keyHash: string | undefined;
      let session: StoredSession | undefined;
      if (!api.keyless) {
        // authentication (auth.ts), inline: 401 without a key, 403 for an unknown, inactive or expired one
        const key = extractKey(req.headers, api.authHeader);
        if (!key) {
          countRequest(api.api_id, 401);
          return sendJson(res, 401, { error: ERRORS.authMissing });
        }
        const nowSeconds = Math.floor(deps.clock.now() / 1000);
        keyHash = keyHashOf(key);
        const found = await deps.lookupSession(keyHash);
        if (!sessionUsable(found, nowSeconds)) {
          countRequest(api.api_id, 403);
          return sendJson(res, 403, { error: ERRORS.disallowed });
        }
        session = found;
        const rights = deps.accessRights(session, config);
        if (rights instanceof Error || !accessAllowed(rights, api, method, relPath)) {
          countRequest(api.api_id, 403);
          return sendJson(res, 403, { error: ERRORS.disallowed });
        }
      }

      const t0 = performance.now();
      let verdict: Verdict;
      try {
        verdict = await deps.engine.check({ api, method, path: relPath, keyHash, session });
      } catch (e) {
        deps.logger.error({ err: (e as Error).message, api: api.api_id }, 'limiter failed');
        countRequest(api.api_id, 500);
        return sendJson(res, 500, { error: 'Internal error' });
      }
      metrics.decision.observe((performance.now() - t0) / 1000);

      if (verdict.kind !== 'allow') {
        const { status, error, scope } = refusal(verdict);
        if (scope === 'quota') metrics.quotaExceeded.inc({ api: api.api_id });
        else metrics.rateLimited.inc({ api: api.api_id, scope });
        countRequest(api.api_id, status);
        return sendJson(res, status, { error }, rateLimitHeaders(verdict.headers, verdict.retryAfter));
      }

      if (deps.streams?.tryHandle(api.api_id, relPath, req, res)) {
        countRequest(api.api_id, 202);
        return;
      }

      const target = deps.upstreamOverride ?? api.targetUrl;
      if (!target) {
        countRequest(api.api_id, 502);
        return sendJson(res, 502, { error: 'No upstream configured for this API' });
      }
      const { origin, basePath } = targetOf(target);
      const forwardPath = (api.strip ? basePath + relPath : basePath + path) + (q === -1 ? '' : url.slice(q));
      const u0 = performance.now();
      const status = await forward(upstreams, origin, forwardPath || '/', req, res, verdict.headers);
      observeUpstream(api.api_id, (performance.now() - u0) / 1000);
      countRequest(api.api_id, status);
    } catch (e) {
      deps.logger.error({ err: (e as Error).message }, 'request failed');
      if (!res.headersSent) sendJson(res, 500, { error: 'Internal error' });
      else res.destroy();
    }
  }

  return { handle, upstreams };
}

export function createGatewayServer(deps: GatewayDeps): { server: Server; close(): Promise<void> } {
  const { handle, upstreams } = createGatewayHandler(deps);
  const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => void handle(req, res));
  return { server, close: () => upstreams.close() };
}
