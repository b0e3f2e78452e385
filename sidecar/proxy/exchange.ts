/**
 * One request through the gateway, from its route to its answer: the engine's CheckRequest, forward()'s
 * Forwarding and the observer's Observed in one object, so each step is a function of it. Its methods are
 * what the engine and the upstream call back: the client of a per-client limit, throttling's view of a
 * waiting request, the end of the upstream exchange.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StoredSession } from '../../contract/sessions.js';
import type { ClientKey, CompiledApi, CompiledConfig } from '../../contract/config.js';
import type { ClientSession } from '../../contract/oauth/client-session.js';
import { clientGone } from '../../lib/http/unread-body.js';
import type { CheckRequest } from '../engine/types.js';
import type { MaybePromise } from '../../limiters/types.js';
import { accessAllowed, certificateMatches, sessionUsable } from './auth.js';
import type { Forwarding } from './upstream.js';
import type { Observed } from './observe.js';
import type { Gateway } from './gateway.js';
import { connectionOf } from '../../lib/http/connection.js';

/** The fields beyond those of Observed (observe.ts), Forwarding (upstream.ts) and CheckRequest (engine/types.ts). */
export interface Exchange extends CheckRequest, Forwarding, Observed {
  api: CompiledApi;
  traceparent: string | undefined;
  stripHeader: string | undefined;
  config: CompiledConfig;
  url: string;
  /** Index of '?' in url, -1 without a query. */
  q: number;
  /** performance.now() when the decision, then the upstream call, started. */
  t0: number;
  /** An upgrade request (WebSocket…): the bytes that followed its head on the socket. */
  upgradeHead: Buffer | undefined;
  /** An OAuth API's request: the SHA-256 of its bearer token (keyHash is then its client's identity). */
  tokenHash: string | undefined;
  /** What every step of the request shares. */
  gw: Gateway;
}

/**
 * A routed request's Exchange: one object literal of one shape (every field set here, the methods
 * module-level functions, not closures), so the steps stay monomorphic. `urlPath` is normalised; `path`
 * is the path the API's rules see (relative to its listen path, or a gRPC call's whole method path).
 */
export function newExchange(
  gw: Gateway,
  req: IncomingMessage,
  res: ServerResponse,
  api: CompiledApi,
  config: CompiledConfig,
  url: string,
  q: number,
  urlPath: string,
  path: string,
  upgradeHead: Buffer | undefined,
): Exchange {
  return {
    req,
    res,
    api,
    config,
    url,
    q,
    urlPath,
    method: (req.method ?? 'GET').toUpperCase(),
    path,
    keyHash: undefined,
    session: undefined,
    rateLimit: undefined,
    status: 0,
    t0: 0,
    done,
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
    client,
    gw,
  };
}

/** Whether `found` (the session of x's key) may make this request: usable, and its access rights reach it. */
export function admits(x: Exchange, found: StoredSession | undefined): found is StoredSession {
  const { deps } = x.gw;
  if (!sessionUsable(found, x.api, Math.floor(deps.clock.now() / 1000))) return false;
  // a certificate-bound key: only over TLS with that client certificate
  const bound = found.session.certificate;
  if (bound !== undefined && bound !== '' && !certificateMatches(x.req, bound)) return false;
  const rights = deps.accessRights(found, x.config);
  return !(rights instanceof Error) && accessAllowed(rights, x.api, x.method, x.path);
}

/**
 * The client of a per-client API limit (engine/types.ts CheckRequest.client), a method of every Exchange:
 * asked only by a limit with limit_by, so other requests never read their peer address.
 */
function client(this: Exchange, by: ClientKey): string {
  const h = this.req.headers;
  if (by.kind === 'ip') return this.gw.clients.of(connectionOf(this.req)?.remoteAddress, h['x-forwarded-for']);
  const v = h[by.name];
  return v === undefined ? '' : Array.isArray(v) ? v.join(', ') : v;
}

// Throttling's view of a waiting request (engine/throttle.ts ThrottleWait), methods of every Exchange: the
// client leaving ends the wait; after a wait the client must still be there and the key still admit the
// request (a key deleted or deactivated meanwhile: 403, as for a new request)
function onClientGone(this: Exchange, wake: () => void): void {
  if (clientGone(this.req, this.res)) return wake();
  this.res.once('close', wake);
}

function stillWanted(this: Exchange): MaybePromise<boolean> {
  if (clientGone(this.req, this.res)) return false;
  const { deps } = this.gw;
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

/** Forwarding.done, a method of every Exchange: the upstream exchange is over (its latency and status counted). */
function done(f: Forwarding): void {
  const x = f as Exchange;
  x.upstreamMs = performance.now() - x.t0;
  x.gw.metrics.upstream(x.api.api_id, x.upstreamMs / 1000);
  x.gw.metrics.request(x.api.api_id, x.status);
}
