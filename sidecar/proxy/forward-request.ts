/**
 * The forward step of an admitted request: to a streaming input of the API (streams/) or to its upstream
 * (the sidecar's --upstream, else the API's target_url) — a tunnel for an upgrade (upgrade.ts), HTTP/2 for
 * an h2c:// target or a gRPC call (upstream-h2.ts), else HTTP/1.1 over undici (upstream.ts). The
 * upstream's answer ends in Exchange.done.
 */
import { childTraceparent } from '../../lib/trace/trace-context.js';
import type { Verdict } from '../engine/types.js';
import { clientGone } from '../../lib/http/unread-body.js';
import type { Exchange } from './exchange.js';
import { ERRORS, answer, isGrpc } from './respond.js';
import { forward } from './upstream.js';
import { forwardH2 } from './upstream-h2.js';
import { upstreamTlsOf } from './upstream-tls.js';
import { forwardUpgrade } from './upgrade.js';

/**
 * A parsed upstream target (origin, base path, and h2c: HTTP/2 with prior knowledge for `h2c://`), so a
 * URL is not parsed on every request.
 */
interface Target {
  origin: string;
  basePath: string;
  h2c: boolean;
}
const targets = new Map<string, Target>();
function targetOf(url: string): Target {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    const h2c = u.protocol === 'h2c:';
    // h2c:// is not a special scheme to URL: its origin is "null", so it is made of the host
    const origin = h2c ? `http://${u.host}` : u.origin;
    t = { origin, basePath: u.pathname.replace(/\/$/, ''), h2c };
    if (targets.size > 1000) targets.clear();
    targets.set(url, t);
  }
  return t;
}

/** `now`: performance.now() when the decision ended, where the upstream call's time starts. */
export function forwardRequest(x: Exchange, verdict: Verdict, now: number): void {
  const { api, res, gw } = x;
  if (gw.deps.streams?.tryHandle(api.api_id, x.path, x.req, res)) {
    gw.metrics.request(api.api_id, 202);
    return;
  }
  const target = gw.deps.upstreamOverride ?? api.targetUrl;
  if (!target) {
    gw.metrics.request(api.api_id, 502);
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
  const tls = origin.charCodeAt(4) === 115 /* https */ ? upstreamTlsOf(api, gw.deps.logger) : undefined;
  if (tls instanceof Error) {
    x.status = 502;
    gw.logUpstream({ err: tls, f: x });
    gw.metrics.request(api.api_id, 502);
    return answer(res, 502, { error: ERRORS.upstream });
  }
  // no upstream call for a client gone (499): a client resetting each stream as soon as it is open (rapid
  // reset, docs/proxy.md "Slow clients and connection caps") had one upstream connection made per stream
  // (the 'close' that aborts an upstream call in flight came before the call: it would run to its end unread)
  if (clientGone(x.req, x.res)) {
    x.status = 499;
    gw.metrics.request(api.api_id, 499);
    return;
  }
  if (x.upgradeHead) forwardUpgrade(origin, forwardPath || '/', x, x.upgradeHead, gw.upgrades);
  // HTTP/2 upstream: an h2c:// target, or a gRPC call (which HTTP/1.1 cannot carry)
  else if (t.h2c || grpc) forwardH2(gw.h2Upstreams, origin, forwardPath || '/', x, tls);
  else forward(gw.upstreams, origin, forwardPath || '/', x, tls);
}
