/**
 * The management facade (docs/contract.md#management-endpoints) on node:http: OAuth clients, the gateway proxy and keys, written
 * through a ResourceBackend so one facade serves `gw standalone` (manifests directory) and `gw facade`
 * (custom resources). Logs name the route template, never the raw path (a keyID is a raw key).
 */
import { buildInfo } from '../lib/build-info.js';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Agent } from '../lib/http/undici.js';
import type { Logger } from '../lib/logger.js';
import type { GatewayOptionsT } from '../lib/options.js';
import { ConflictError, NotReadyError, SetupError, TooLargeError, type ResourceBackend } from './backend.js';
import { KeyedLock, type FacadeContext, type FacadeOAuth, type Route } from './context.js';
import { CredentialRefused } from './auth.js';
import { addressGroup } from '../lib/ip/client-address.js';
import { clientGone, closeIfBodyUnread } from '../lib/http/unread-body.js';
import { HttpError, NO_SUCH_ROUTE, sendError, sendJson } from '../lib/http/http-util.js';
import { facadeOpenApi } from './openapi.js';
import { DEFAULT_FACADE_RATE_LIMIT, FacadeLimiter, type FacadeRateLimit } from './rate-limit.js';
import { keyRoutes } from './routes-keys.js';
import { oauthRoutes } from './routes-oauth.js';
import { oauthFlowRoutes } from './routes-oauth-flow.js';
import { normalizeOrigin, proxyRoutes } from './routes-proxy.js';
import { FACADE_AGENT } from '../lib/tuning.js';
const { createServer } = process.getBuiltinModule('node:http');

export interface FacadeServerOptions {
  backend: ResourceBackend;
  options: GatewayOptionsT;
  /**
   * The gateway's own URLs (e.g. http://127.0.0.1:8080): the origins POST /api/proxy may call when
   * options.gateway_urls is unset, with the other names that reach them (ALSO_REACHED_AS: a wildcard host
   * is reached on 127.0.0.1, localhost and [::1]; 127.0.0.1 and [::1] as localhost too).
   */
  gatewayOrigins: string[];
  logger: Logger;
  /** Namespace of facade-imported AccessKeys (default "default") and, when set, the only one APIs are looked up in. */
  namespace?: string;
  /** Per-client-IP limit of the facade itself; false turns it off. Default: options.facade_rate_limit (100 per 1 s). */
  rateLimit?: FacadeRateLimit | false;
  /** GET /readyz answers 503 while this returns false. */
  ready?: () => boolean;
  /** OAuth codes and introspection (docs/contract.md#oauth-endpoints); absent: those routes answer 503. */
  oauth?: FacadeOAuth;
}

/**
 * The other names that reach a listen host of the gateway: a wildcard host is reached on every loopback
 * address; 127.0.0.1 and [::1] by `localhost` too (never each other: IPv4 and IPv6 are different sockets);
 * `localhost` by whichever loopback address it was bound to.
 */
const ALSO_REACHED_AS: Record<string, string[]> = {
  '0.0.0.0': ['127.0.0.1', 'localhost', '[::1]'],
  '[::]': ['127.0.0.1', 'localhost', '[::1]'],
  '127.0.0.1': ['localhost'],
  '[::1]': ['localhost'],
  localhost: ['127.0.0.1', '[::1]'],
};

export function allowedOrigins(gatewayUrls: string[] | undefined, gatewayOrigins: string[]): Set<string> {
  const out = new Set<string>();
  for (const u of gatewayUrls ?? gatewayOrigins) {
    const o = normalizeOrigin(u);
    if (!o) throw new Error(`gateway_urls: ${JSON.stringify(u)} is not an http(s) URL`);
    out.add(o);
    const url = new URL(o);
    if (gatewayUrls === undefined) {
      for (const h of ALSO_REACHED_AS[url.hostname] ?? []) {
        url.hostname = h;
        out.add(url.origin);
      }
    }
  }
  return out;
}

interface CompiledRoute extends Route {
  regex: RegExp;
  names: string[];
}

function compile(route: Route): CompiledRoute {
  const names: string[] = [];
  const source = route.template.replace(/\{(\w+)\}/g, (_m, n: string) => {
    names.push(n);
    return '([^/]+)';
  });
  return { ...route, regex: new RegExp(`^${source}$`), names };
}

export function createFacadeServer(opts: FacadeServerOptions): Server {
  const { backend, options, logger } = opts;
  const dispatcher = new Agent(FACADE_AGENT);
  const ctx: FacadeContext = {
    backend,
    options,
    apiNamespace: opts.namespace,
    keyNamespace: opts.namespace ?? 'default',
    gatewayOrigins: allowedOrigins(options.gateway_urls, opts.gatewayOrigins),
    dispatcher,
    logger,
    locks: new KeyedLock(),
    ...(opts.oauth ? { oauth: opts.oauth } : {}),
  };
  const rl = opts.rateLimit === undefined ? (options.facade_rate_limit ?? DEFAULT_FACADE_RATE_LIMIT) : opts.rateLimit;
  if (rl && (!(rl.rate >= 1) || !(rl.per > 0))) throw new Error('facade rate limit: rate must be ≥ 1 and per > 0');
  const limiter = rl ? new FacadeLimiter(rl) : undefined;
  if (!options.access_tokens?.length)
    logger.warn('no access_tokens configured: every /api/... request is refused with 403');
  if (!options.secret) logger.warn('no secret configured: every /gw/... request is refused with 403');

  const openapiRoute: Route = {
    template: '/openapi.json',
    methods: { GET: async ({ res }) => sendJson(res, 200, facadeOpenApi) },
  };
  const routes: CompiledRoute[] = [...oauthRoutes, ...oauthFlowRoutes, ...proxyRoutes, ...keyRoutes, openapiRoute].map(
    compile,
  );

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<string> => {
    const url = new URL(req.url ?? '/', 'http://facade.invalid');
    // The raw path, not url.pathname: a URL parser resolves "." / ".." and "%2E%2E" segments, which
    // would turn GET /gw/keys/%2E%2E into GET /gw/keys. Raw, such a key id reaches its route and is refused.
    const raw = req.url ?? '/';
    let path = raw.startsWith('/') ? raw.split(/[?#]/, 1)[0]! : url.pathname;
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    const method = req.method ?? 'GET';

    if ((path === '/healthz' || path === '/readyz') && method !== 'GET' && method !== 'HEAD')
      throw new HttpError(405, `method ${method} not allowed on ${path}`, { allow: 'GET, HEAD' });
    if (path === '/healthz') {
      sendJson(res, 200, { status: 'ok', build: buildInfo() });
      return path;
    }
    if (path === '/readyz') {
      const ok = opts.ready ? opts.ready() : true;
      if (ok) sendJson(res, 200, { status: 'ok' });
      else sendError(res, 503, 'not ready');
      return path;
    }

    const retry = limiter?.take(addressGroup(req.socket.remoteAddress));
    if (retry !== undefined) {
      throw new HttpError(429, 'too many requests to the management API', { 'retry-after': String(retry) });
    }

    for (const r of routes) {
      const m = r.regex.exec(path);
      if (!m) continue;
      // HEAD wherever GET is served (node:http sends the headers and drops the body).
      const handler = r.methods[method] ?? (method === 'HEAD' ? r.methods.GET : undefined);
      if (!handler) {
        const allow = Object.keys(r.methods);
        if (r.methods.GET) allow.push('HEAD');
        throw new HttpError(405, `method ${method} not allowed on ${r.template}`, { allow: allow.join(', ') });
      }
      const params: Record<string, string> = {};
      r.names.forEach((n, i) => {
        try {
          params[n] = decodeURIComponent(m[i + 1]!);
        } catch {
          throw new HttpError(400, `${n}: malformed percent-encoding`);
        }
      });
      // The route is known from here on: errors are logged under its template.
      try {
        await handler({ req, res, ctx, params, query: url.searchParams });
      } catch (e) {
        (e as { route?: string }).route = r.template;
        throw e;
      }
      return r.template;
    }
    throw new HttpError(404, NO_SUCH_ROUTE);
  };

  const server = createServer((req, res) => {
    const started = process.hrtime.bigint();
    const done = (route: string): void => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      logger.debug(
        {
          method: req.method,
          route,
          status: res.statusCode,
          ms: Math.round(ms * 10) / 10,
          client: req.socket.remoteAddress,
        },
        'facade request',
      );
    };
    handle(req, res).then(done, (e: unknown) => {
      const route = (e as { route?: string }).route ?? '(unmatched)';
      if (e instanceof CredentialRefused) limiter?.failed(addressGroup(req.socket.remoteAddress));
      if (res.headersSent) {
        res.destroy();
      } else if (clientGone(req, res)) {
        // an upload the client abandoned: nobody to answer, and no fault of the facade's
        logger.debug({ route, err: (e as Error).message }, 'facade client gone mid-request');
        res.destroy();
      } else if (e instanceof HttpError) {
        closeIfBodyUnread(req, res);
        sendError(res, e.status, e.message, e.headers);
      } else if (e instanceof ConflictError) {
        closeIfBodyUnread(req, res);
        sendError(res, 409, e.message);
      } else if (e instanceof NotReadyError) {
        sendError(res, 504, e.message);
      } else if (e instanceof TooLargeError) {
        sendError(res, 413, e.message);
      } else if (e instanceof SetupError) {
        logger.warn({ route, err: e.message }, 'facade write refused: missing setup');
        sendError(res, 503, e.message);
      } else {
        logger.error({ route, err: (e as Error).message }, 'facade request failed');
        sendError(res, 500, 'internal error');
      }
      done(route);
    });
  });
  // Slow clients cannot hold connections: the listener serving this handler applies adminListenerLimits
  // (lib/options.ts) when it listens; these are the same, for a server that is listened on directly
  server.headersTimeout = 20_000;
  server.requestTimeout = 60_000;
  server.on('close', () => {
    void dispatcher.close();
  });
  return server;
}
