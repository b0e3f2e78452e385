/**
 * The gateway a request meets (docs/contract.md#request-path): route → authenticate → API scope → key scope → quota →
 * proxy. The limiter engine decides; this file turns decisions into HTTP.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../../lib/logger.js';
import type { Clock } from '../../lib/clock.js';
import type { StoredSession } from '../../contract/sessions.js';
import { StoreUnavailableError } from '../../lib/store/store-calls.js';
import { answerClientErrorsWithJson } from '../../lib/http/client-error.js';
import { clientGone } from '../../lib/http/unread-body.js';
import type { AccessDefinitionT } from '../../crds/schemas/access-definition.js';
import type { ClientKey, CompiledApi, CompiledConfig } from '../../contract/config.js';
import { ClientAddresses } from '../../lib/ip/client-address.js';
import type { CheckRequest, Engine, Verdict } from '../engine/types.js';
import type { MaybePromise } from '../../limiters/types.js';
import type { GatewayMetrics } from '../metrics.js';
import { accessAllowed, certificateMatches, extractKey, keyHashOf, sessionUsable } from './auth.js';
import { ERRORS, rateLimitHeaders, answer } from './respond.js';
import { route } from './router.js';
import { forward, Upstreams, type Forwarding } from './upstream.js';
import { forwardH2, H2Upstreams } from './upstream-h2.js';
import { attachProtocols, type ListenerTls } from './protocols.js';
import { upstreamTlsOf } from './upstream-tls.js';
import { isGrpc } from './respond.js';
import { forwardUpgrade, Tunnels, upgradeResponse } from './upgrade.js';
import { DRAIN_DEADLINE } from '../../lib/serve.js';
import { normalizePath, strictPathProblem } from '../../lib/request-path.js';
import { throttledLog } from '../../lib/log-throttle.js';
import { childTraceparent } from '../../lib/trace/trace-context.js';
import type { Observed, RequestObserver } from './observe.js';
import type { CompiledOAuth } from '../../contract/config.js';
import type { ClientSession } from '../../contract/oauth/client-session.js';
import { oauthEndpointOf, type OAuthEndpoints } from '../oauth/endpoints.js';
import type { BearerLookup } from '../oauth/bearer.js';
const { createServer } = process.getBuiltinModule('node:http');

export interface GatewayDeps {
  config(): CompiledConfig;
  /** The session of a key hash: synchronous when the store knows it without I/O. */
  lookupSession(keyHash: string): MaybePromise<StoredSession | undefined>;
  /** Effective access rights of a session (policies applied); an Error when its policies cannot be resolved. */
  accessRights(
    stored: StoredSession,
    config: CompiledConfig,
  ): Record<string, AccessDefinitionT> | null | undefined | Error;
  engine: Engine;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  /** Sidecar --upstream: overrides every API's target_url. */
  upstreamOverride?: string;
  ready(): boolean;
  /** What /healthz's body adds (the shared store's state). */
  health?(): Record<string, unknown>;
  upstreamTimeoutMs?: number;
  /** strict_paths (docs/contract.md#gateway-configuration): 400 for path forms upstreams read differently (lib/request-path.ts). */
  strictPaths?: boolean;
  /** OAuth APIs (docs/contract.md#oauth-endpoints): the oauth/* endpoints and bearer token lookups. */
  oauth?: { endpoints: OAuthEndpoints; bearer: BearerLookup };
  /** Finds the client address of a `limit_by: ip` limit (trusted_proxies, ipv6_prefix); default: the TCP peer. */
  clientAddresses?: ClientAddresses;
  /** Streaming inputs served under an API's listen path (streams/); false = not a stream path. */
  streams?: { tryHandle(apiId: string, relPath: string, req: IncomingMessage, res: ServerResponse): boolean };
  /** Server spans and access logs (observe.ts); absent when both are off. */
  observer?: RequestObserver;
  /** TLS on the gateway listener (protocols.ts); absent: plain. */
  tls?: ListenerTls;
  /** HTTP/2 with prior knowledge on a plain listener; default true. */
  h2c?: boolean;
}

function refusal(v: Exclude<Verdict, { kind: 'allow' }>): { status: number; error: string; scope: string } {
  switch (v.kind) {
    case 'api_limited':
      return { status: 429, error: ERRORS.apiLimited, scope: 'api' };
    case 'key_limited':
      return { status: 429, error: ERRORS.keyLimited, scope: 'key' };
    case 'quota_exceeded':
      return { status: 403, error: ERRORS.quota, scope: 'quota' };
    case 'disallowed':
      return { status: 403, error: ERRORS.disallowed, scope: 'auth' };
    case 'unavailable':
      return { status: 503, error: ERRORS.rateLimiterUnavailable, scope: 'unavailable' };
  }
}

/**
 * Parsed upstream targets (origin, base path, and h2: HTTP/2 with prior knowledge for `h2c://`), so a URL
 * is not parsed on every request.
 */
interface Target {
  origin: string;
  basePath: string;
  h2c: boolean;
  /** The h2c origin of an http:// target, for the gRPC calls sent to it. */
  h2Origin: string;
}
const targets = new Map<string, Target>();
function targetOf(url: string): Target {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    const h2c = u.protocol === 'h2c:';
    // h2c:// is not a special scheme to URL: its origin is "null", so it is made of the host
    const origin = h2c ? `http://${u.host}` : u.origin;
    t = { origin, basePath: u.pathname.replace(/\/$/, ''), h2c, h2Origin: origin };
    if (targets.size > 1000) targets.clear();
    targets.set(url, t);
  }
  return t;
}

const STATUS_CLASS = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/** `http://host:port/p?q` → `/p?q` (`/` when it has no path); anything else unchanged (`*`: no API). */
function originFormOf(url: string): string {
  const m = /^https?:\/\/[^/?#]*/i.exec(url);
  if (!m) return url;
  const rest = url.slice(m[0].length);
  return rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
}

/** One request through the gateway: the engine's CheckRequest and forward()'s Forwarding in one object. */
interface Exchange extends CheckRequest, Forwarding, Observed {
  api: CompiledApi;
  traceparent: string | undefined;
  config: CompiledConfig;
  url: string;
  /** Index of '?' in url, -1 without a query. */
  q: number;
  /** url without the query. (`path` is the path relative to the API's listen path.) */
  urlPath: string;
  /** performance.now() when the decision, then the upstream call, started. */
  t0: number;
  /** An upgrade request (WebSocket…): the bytes that followed its head on the socket. */
  upgradeHead?: Buffer;
  /** An OAuth API's request: the SHA-256 of its bearer token (keyHash is then its client's identity). */
  tokenHash?: string;
}

/** How many Host fields a request's raw header list holds (names at even indices). */
function hostCount(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!;
    if (k.length === 4 && k.toLowerCase() === 'host') n++;
  }
  return n;
}

export function createGatewayHandler(deps: GatewayDeps): {
  handle(req: IncomingMessage, res: ServerResponse, upgradeHead?: Buffer): void;
  upstreams: Upstreams;
  h2Upstreams: H2Upstreams;
  tunnels: Tunnels;
} {
  // upstream failures: a warn line a second at most (the metrics count each), with the cause
  const logUpstream = throttledLog<{ err: Error; f: Forwarding }>(1000, ({ err, f }, suppressed) => {
    const code = (err as { code?: unknown }).code;
    deps.logger.warn(
      {
        api: (f as Exchange).api.api_id,
        status: f.status,
        err: err.message,
        ...(typeof code === 'string' ? { code } : {}),
        ...(suppressed ? { suppressed } : {}),
      },
      'upstream call failed',
    );
  });
  const upstreams = new Upstreams({
    timeoutMs: deps.upstreamTimeoutMs ?? 30_000,
    onError: (err, f) => logUpstream({ err, f }),
  });
  const h2Upstreams = new H2Upstreams({
    timeoutMs: deps.upstreamTimeoutMs ?? 30_000,
    onError: (err, f) => logUpstream({ err, f }),
  });
  const tunnels = new Tunnels();
  const upgrades = {
    timeoutMs: deps.upstreamTimeoutMs ?? 30_000,
    tunnels,
    onError: (err: Error, f: Forwarding) => logUpstream({ err, f }),
  };
  const { metrics, observer } = deps;
  const protocolCounters = {
    h1: metrics.requestsByProtocol.labels({ protocol: '1.1' }),
    h2: metrics.requestsByProtocol.labels({ protocol: '2' }),
    grpc: metrics.requestsByProtocol.labels({ protocol: 'grpc' }),
  };
  const strictPaths = deps.strictPaths === true;
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
      c = metrics.requests.labels({ api: metrics.apiLabel(apiId), code });
      if (cls >= 0 && cls < STATUS_CLASS.length) byClass[cls] = c;
    }
    c.inc();
  };
  const observeUpstream = (apiId: string, seconds: number): void => {
    let h = upstreamHistograms.get(apiId);
    if (!h) {
      if (upstreamHistograms.size > 10_000) upstreamHistograms.clear();
      upstreamHistograms.set(apiId, (h = metrics.upstream.labels({ api: metrics.apiLabel(apiId) })));
    }
    h.observe(seconds);
  };

  /** Anything unexpected: logged, answered 500 (or the connection dropped once the answer has begun). */
  function fail(res: ServerResponse, e: unknown, what = 'request failed', x?: Exchange): void {
    deps.logger.error({ err: (e as Error)?.message ?? String(e), ...(x ? { api: x.api.api_id } : {}) }, what);
    if (x) countRequest(x.api.api_id, 500);
    if (!res.headersSent) answer(res, 500, { error: 'Internal error' });
    else res.destroy();
  }

  /**
   * The steps of a request, each a function of its Exchange: route and key (handle) → session checks
   * (authorise) → limits (decide) → answer or forward (decided) → metrics (forwarded). A step that waits
   * for the store continues with .then; with sessions and limits in process the request runs
   * synchronously into undici, with no promise or async frame of gw's own.
   */
  function handle(req: IncomingMessage, res: ServerResponse, upgradeHead?: Buffer): void {
    try {
      if (req.httpVersionMajor !== 2) protocolCounters.h1.inc();
      else (isGrpc(req) ? protocolCounters.grpc : protocolCounters.h2).inc();
      let url = req.url ?? '/';
      // absolute-form (`GET http://host/path`, RFC 9112 §3.2.2, which a server must accept): its path
      if (url.charCodeAt(0) !== 47 /* / */) url = originFormOf(url);
      // a fragment never belongs in a request target (RFC 9112 §3.2); an upstream's URL parser cuts it,
      // so `/users#x` would be served as `/users` past the limits of `/users` (docs/proxy.md)
      if (url.indexOf('#') !== -1) {
        countRequest('', 400);
        return answer(res, 400, { error: 'Bad request path: a fragment (#) is not accepted in a request target' });
      }
      const q = url.indexOf('?');
      const rawPath = q === -1 ? url : url.slice(0, q);
      if (strictPaths) {
        const problem = strictPathProblem(rawPath);
        if (problem !== undefined) {
          countRequest('', 400);
          return answer(res, 400, { error: `Bad request path: ${problem}` });
        }
      }
      // normalised (lib/request-path.ts): routing, allowed_urls, endpoint rules and the forwarded path all
      // see the path the upstream will serve
      const urlPath = normalizePath(rawPath);
      // the health paths answer GET and HEAD (docs/contract.md#health-and-readiness), 405 otherwise
      if ((urlPath === '/healthz' || urlPath === '/readyz') && req.method !== 'GET' && req.method !== 'HEAD')
        return answer(res, 405, { error: 'Method Not Allowed' }, { allow: 'GET, HEAD' });
      if (urlPath === '/healthz') return answer(res, 200, { status: 'ok', ...deps.health?.() });
      // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (node's own check is off to answer in JSON)
      if (req.headers.host === undefined && req.httpVersionMinor === 1 && req.httpVersionMajor === 1)
        return answer(res, 400, { error: 'Host header missing' });
      // and more than one Host is a 400 in any HTTP/1.x request: node keeps the first, an upstream or a
      // cache in front may read the other (one pass over rawHeaders, only when Host is present)
      if (req.headers.host !== undefined && req.httpVersionMajor === 1 && hostCount(req.rawHeaders) > 1)
        return answer(res, 400, { error: 'more than one Host header' });
      // TRACE would echo the request's credentials and cookies back (cross-site tracing): refused, as nginx does
      if (req.method === 'TRACE')
        return answer(
          res,
          405,
          { error: 'Method Not Allowed' },
          { allow: 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS' },
        );
      if (urlPath === '/readyz') {
        const ok = deps.ready();
        return answer(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not ready' });
      }

      const config = deps.config();
      const r = route(config.apis, urlPath);
      if (!r || !r.api.active) {
        countRequest(r ? r.api.api_id : '', 404); // no API on the path: api=""
        if (observer !== undefined) observer.begin(unrouted(req, res, urlPath));
        return answer(res, 404, { error: ERRORS.notFound });
      }
      const { api } = r;
      // a gRPC call: endpoint rules and allowed_urls see its whole method path (/package.Service/Method),
      // and it is forwarded unstripped (a gRPC server serves that path), whatever the listen path
      const grpc = req.httpVersionMajor === 2 && isGrpc(req);
      const x: Exchange = {
        req,
        res,
        api,
        config,
        url,
        q,
        urlPath,
        method: (req.method ?? 'GET').toUpperCase(),
        path: grpc ? urlPath : r.relPath,
        keyHash: undefined,
        session: undefined,
        rateLimit: undefined,
        status: 0,
        t0: 0,
        done: forwarded,
        upgradeHead,
        tokenHash: undefined,
        onClientGone,
        stillWanted,
        decision: undefined,
        upstreamMs: -1,
        traceparent: undefined,
        stripHeader: undefined,
        span: undefined,
        began: 0,
        clientAddress: '',
        client: clientOf,
      };
      if (observer !== undefined) observer.begin(x);
      if (api.keyless) return decide(x);
      if (api.oauth !== undefined) return oauthRequest(x, api.oauth);

      // authentication (auth.ts), inline: 401 without a key, 403 for an unknown, inactive or expired one
      const key = extractKey(req.headers, api.authHeader);
      if (!key) {
        countRequest(api.api_id, 401);
        return answer(res, 401, { error: ERRORS.authMissing });
      }
      x.keyHash = keyHashOf(key);
      const found = deps.lookupSession(x.keyHash);
      if (found instanceof Promise) {
        if (x.span !== undefined) observer?.storeWait(x, found, 'gw.session_lookup');
        found.then(
          (s) => authorise(x, s),
          (e: unknown) => lookupFailed(x, e),
        );
      } else authorise(x, found);
    } catch (e) {
      fail(res, e);
    }
  }

  /**
   * An OAuth API (docs/contract.md#oauth-endpoints): its oauth/* endpoints, else a bearer access token of one of its clients.
   * Missing → 401 as for keys; unknown, expired or revoked → 401 invalid_token (RFC 6750 §3.1).
   */
  function oauthRequest(x: Exchange, oauth: CompiledOAuth): void {
    const endpoint = oauthEndpointOf(x.path);
    if (endpoint !== undefined) {
      if (!deps.oauth) {
        countRequest(x.api.api_id, 503);
        return answer(x.res, 503, { error: 'server_error', error_description: 'OAuth is unavailable' });
      }
      void deps.oauth.endpoints
        .serve(
          endpoint,
          x.api,
          oauth,
          x.req,
          x.res,
          x.q === -1 ? '' : x.url.slice(x.q + 1),
          clients.of(x.req.socket.remoteAddress, x.req.headers['x-forwarded-for']),
        )
        .then((status) => countRequest(x.api.api_id, status));
      return;
    }
    const token = extractKey(x.req.headers, x.api.authHeader);
    if (!token) {
      countRequest(x.api.api_id, 401);
      return answer(x.res, 401, { error: ERRORS.authMissing });
    }
    x.tokenHash = keyHashOf(token);
    const found = deps.oauth ? deps.oauth.bearer(x.tokenHash, x.api) : undefined;
    if (found instanceof Promise)
      found.then(
        (s) => bearerFound(x, s),
        (e: unknown) => lookupFailed(x, e),
      );
    else bearerFound(x, found);
  }

  function bearerFound(x: Exchange, cs: ClientSession | undefined): void {
    if (cs === undefined) {
      countRequest(x.api.api_id, 401);
      metrics.oauthErrors.inc({ api: x.api.api_id, error: 'invalid_token' });
      return answer(
        x.res,
        401,
        { error: 'invalid_token' },
        { 'www-authenticate': 'Bearer error="invalid_token"', 'cache-control': 'no-store' },
      );
    }
    x.keyHash = cs.identityHash;
    authorise(x, cs.stored);
  }

  /** The session store cannot answer and knows nothing of the key: 503, the client may retry (the store's own errors are logged by it). */
  function lookupFailed(x: Exchange, e: unknown): void {
    if (!(e instanceof StoreUnavailableError)) return fail(x.res, e);
    countRequest(x.api.api_id, 503);
    answer(x.res, 503, { error: ERRORS.sessionStore }, { 'retry-after': '1' });
  }

  /** Whether `found` (the session of x's key) may make this request: usable, and its access rights reach it. */
  function admits(x: Exchange, found: StoredSession | undefined): found is StoredSession {
    if (!sessionUsable(found, x.api, Math.floor(deps.clock.now() / 1000))) return false;
    // a certificate-bound key: only over TLS with that client certificate
    const bound = found.session.certificate;
    if (bound !== undefined && bound !== '' && !certificateMatches(x.req, bound)) return false;
    const rights = deps.accessRights(found, x.config);
    return !(rights instanceof Error) && accessAllowed(rights, x.api, x.method, x.path);
  }

  function authorise(x: Exchange, found: StoredSession | undefined): void {
    try {
      if (!admits(x, found)) {
        countRequest(x.api.api_id, 403);
        return answer(x.res, 403, { error: ERRORS.disallowed });
      }
      x.session = found;
      decide(x);
    } catch (e) {
      fail(x.res, e);
    }
  }

  // Throttling's view of a waiting request (engine/throttle.ts ThrottleWait), methods of every Exchange:
  // the client leaving ends the wait; after a wait the client must still be there and the key still admit
  // the request (a key deleted or deactivated meanwhile: 403, as for a new request)
  function onClientGone(this: Exchange, wake: () => void): void {
    if (clientGone(this.req, this.res)) return wake();
    this.res.once('close', wake);
  }
  function stillWanted(this: Exchange): MaybePromise<boolean> {
    if (clientGone(this.req, this.res)) return false;
    if (this.tokenHash !== undefined) {
      // an OAuth request: its token must still be valid (revoked or its client deleted meanwhile: 403)
      const cs = deps.oauth?.bearer(this.tokenHash, this.api);
      const admitsToken = (c: ClientSession | undefined): boolean => c !== undefined && admits(this, c.stored);
      return cs instanceof Promise ? cs.then(admitsToken, () => false) : admitsToken(cs);
    }
    if (this.keyHash === undefined) return true;
    const found = deps.lookupSession(this.keyHash);
    return found instanceof Promise
      ? found.then(
          (s) => admits(this, s),
          () => false,
        )
      : admits(this, found);
  }

  // The client of a per-client API limit (engine/types.ts CheckRequest.client), a method of every Exchange:
  // asked only by a limit with limit_by, so other requests never read their peer address
  const clients = deps.clientAddresses ?? new ClientAddresses([]);
  function clientOf(this: Exchange, by: ClientKey): string {
    const h = this.req.headers;
    if (by.kind === 'ip') return clients.of(this.req.socket.remoteAddress, h['x-forwarded-for']);
    const v = h[by.name];
    return v === undefined ? '' : Array.isArray(v) ? v.join(', ') : v;
  }

  function decide(x: Exchange): void {
    x.t0 = performance.now();
    let v: MaybePromise<Verdict>;
    try {
      v = deps.engine.check(x);
    } catch (e) {
      return fail(x.res, e, 'limiter failed', x);
    }
    if (v instanceof Promise) {
      if (x.span !== undefined) observer?.storeWait(x, v, 'gw.rate_limit');
      v.then(
        (verdict) => decided(x, verdict),
        (e: unknown) => fail(x.res, e, 'limiter failed', x),
      );
    } else decided(x, v);
  }

  function decided(x: Exchange, verdict: Verdict): void {
    try {
      const { api, res } = x;
      const now = performance.now();
      metrics.decision.observe((now - x.t0) / 1000);
      x.decision = verdict.kind;
      if (verdict.kind !== 'allow') {
        const { status, error, scope } = refusal(verdict);
        const label = metrics.apiLabel(api.api_id);
        if (scope === 'quota') metrics.quotaExceeded.inc({ api: label });
        else if (scope === 'unavailable') metrics.rateLimiterUnavailable.inc({ api: label });
        else if (scope !== 'auth') metrics.rateLimited.inc({ api: label, scope });
        countRequest(api.api_id, status);
        return answer(res, status, { error }, rateLimitHeaders(verdict.headers, verdict.retryAfter));
      }
      if (deps.streams?.tryHandle(api.api_id, x.path, x.req, res)) {
        countRequest(api.api_id, 202);
        return;
      }
      const target = deps.upstreamOverride ?? api.targetUrl;
      if (!target) {
        countRequest(api.api_id, 502);
        return answer(res, 502, { error: 'No upstream configured for this API' });
      }
      const t = targetOf(target);
      const { origin, basePath } = t;
      const grpc = x.req.httpVersionMajor === 2 && isGrpc(x.req);
      const forwardPath =
        (api.strip && !grpc ? basePath + x.path : basePath + x.urlPath) + (x.q === -1 ? '' : x.url.slice(x.q));
      x.rateLimit = verdict.headers;
      // strip_auth_data: the credential was for the gateway (a keyless API reads none, so passes it on)
      if (api.stripAuth && !api.keyless) x.stripHeader = api.authHeader;
      // W3C trace context: the upstream sees this hop as the parent (observe.ts set it when spans are on)
      if (x.traceparent === undefined) x.traceparent = childTraceparent(x.req.headers.traceparent);
      x.t0 = now; // the upstream call starts where the decision ended
      // an https:// upstream's TLS options (proxy.transport); undefined: node's defaults
      const tls = origin.charCodeAt(4) === 115 /* https */ ? upstreamTlsOf(api, deps.logger) : undefined;
      if (tls instanceof Error) {
        logUpstream({ err: tls, f: x });
        countRequest(api.api_id, 502);
        return answer(res, 502, { error: ERRORS.upstream });
      }
      if (x.upgradeHead) forwardUpgrade(origin, forwardPath || '/', x, x.upgradeHead, upgrades);
      // HTTP/2 upstream: an h2c:// target, or a gRPC call (which HTTP/1.1 cannot carry)
      else if (t.h2c || grpc) forwardH2(h2Upstreams, origin, forwardPath || '/', x, tls);
      else forward(upstreams, origin, forwardPath || '/', x, tls);
    } catch (e) {
      fail(x.res, e);
    }
  }

  /** Forwarding.done: the upstream exchange is over. */
  function forwarded(f: Forwarding): void {
    const x = f as Exchange;
    x.upstreamMs = performance.now() - x.t0;
    observeUpstream(x.api.api_id, x.upstreamMs / 1000);
    countRequest(x.api.api_id, x.status);
  }

  return { handle, upstreams, h2Upstreams, tunnels };
}

/** A request that routed to no API, as the observer sees it. */
function unrouted(req: IncomingMessage, res: ServerResponse, urlPath: string): Observed {
  return {
    req,
    res,
    method: (req.method ?? 'GET').toUpperCase(),
    urlPath,
    api: undefined,
    status: 0,
    decision: undefined,
    upstreamMs: -1,
    traceparent: undefined,
    span: undefined,
    began: 0,
    clientAddress: '',
  };
}

/**
 * Which upgrade offers become tunnels (the 'upgrade' event): a bodiless one for a protocol other than h2c.
 * The others are served as ordinary requests, their Upgrade headers dropped as hop-by-hop, as nginx does:
 * an h2c offer (`curl --http2` on http://) or an upgrade offer with a body lost its body on the tunnel
 * path, and the upstream, waiting for it, timed out (504).
 */
export function tunnelsUpgrade(req: IncomingMessage): boolean {
  const h = req.headers;
  if ((h.upgrade ?? '').toLowerCase() === 'h2c') return false;
  return h['transfer-encoding'] === undefined && (h['content-length'] === undefined || h['content-length'] === '0');
}

export function createGatewayServer(deps: GatewayDeps): { server: Server; close(): Promise<void> } {
  const { handle, upstreams, h2Upstreams, tunnels } = createGatewayHandler(deps);
  const server = createServer(
    {
      keepAliveTimeout: 5_000,
      // no cap on a request's whole duration: node's default (300 s) cut uploads that were still flowing
      // with a 408; slow heads are still cut (headersTimeout: headers_timeout, 60 s, set by listen(); this
      // one for a server listened on directly, as requestTimeout 0 also made node's default 0)
      requestTimeout: 0,
      headersTimeout: 60_000,
      // the gateway answers a request without Host itself (400 JSON; node's own 400 had an empty body)
      requireHostHeader: false,
      shouldUpgradeCallback: tunnelsUpgrade,
    },
    handle, // node passes (req, res): no upgrade head
  );
  // Upgrade (WebSocket…): the same checks, then a tunnel to the upstream (upgrade.ts)
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on('error', () => undefined); // a client gone mid-handshake: nothing to answer
    handle(req, upgradeResponse(req, socket), head);
  });
  server.on(DRAIN_DEADLINE, () => tunnels.closeAll());
  answerClientErrorsWithJson(server, (_status, reason) => ({ error: reason }));
  // TLS, h2c: the connections handed to the protocol they speak (protocols.ts); HTTP/2 requests reach handle too
  const protocols = attachProtocols(server, handle, { tls: deps.tls, h2c: deps.h2c ?? true, logger: deps.logger });
  return {
    server,
    close: async () => {
      protocols.stop();
      tunnels.closeAll();
      await Promise.all([upstreams.close(), h2Upstreams.close()]);
    },
  };
}
