/**
 * The gateway a request meets (docs/contract.md#request-path). `handle` reads a request top to bottom, one
 * named step per file:
 *   requestTarget, refuseTarget, refuseMethod (request-target.ts) → answerOwn (own-answers.ts: health, Host, TRACE)
 *   → routeRequest (route-request.ts: API or 404, the Exchange) → authenticateKey / authenticateBearer
 *   (authenticate-key.ts, authenticate-bearer.ts) → authorise (authorise.ts) → limit (limit.ts: the
 *   engine's verdict, refusals) → forwardRequest (forward-request.ts) → Exchange.done (exchange.ts).
 * A step that waits for the store continues with .then; with sessions and limits in process the request
 * runs synchronously into undici, with no promise or async frame of gw's own. What the steps share is one
 * Gateway (gateway.ts) made here.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { answerClientErrorsWithJson } from '../../lib/http/client-error.js';
import { normalizePath } from '../../lib/request-path.js';
import { DRAIN_DEADLINE } from '../../lib/serve.js';
import { GATEWAY_KEEP_ALIVE_MS, PIPELINED_MAX } from '../../lib/tuning.js';
import { oneAtATime } from '../../lib/http/pipelined.js';
import { Gateway, type GatewayDeps } from './gateway.js';
import { requestTarget, refuseMethod, refuseTarget } from './request-target.js';
import { answerOwn } from './own-answers.js';
import { routeRequest } from './route-request.js';
import { authenticateKey } from './authenticate-key.js';
import { authenticateBearer } from './authenticate-bearer.js';
import { limit } from './limit.js';
import type { Upstreams } from './upstream.js';
import type { H2Upstreams } from './upstream-h2.js';
import { upgradeResponse, type Tunnels } from './upgrade.js';
import { attachProtocols } from './protocols.js';
const { createServer } = process.getBuiltinModule('node:http');

export function createGatewayHandler(deps: GatewayDeps): {
  handle(req: IncomingMessage, res: ServerResponse, upgradeHead?: Buffer): void;
  upstreams: Upstreams;
  h2Upstreams: H2Upstreams;
  tunnels: Tunnels;
} {
  const gw = new Gateway(deps);

  /** One request: every step answers it or hands it to the next. */
  function handle(req: IncomingMessage, res: ServerResponse, upgradeHead?: Buffer): void {
    try {
      gw.metrics.protocol(req);
      const url = requestTarget(req);
      const q = url.indexOf('?');
      const rawPath = q === -1 ? url : url.slice(0, q);
      if (refuseTarget(gw, res, url, rawPath) || refuseMethod(gw, req, res)) return;
      // normalised (lib/request-path.ts): routing, allowed_urls, endpoint rules and the forwarded path all
      // see the path the upstream will serve
      const urlPath = normalizePath(rawPath);
      if (answerOwn(gw, req, res, urlPath)) return;
      const x = routeRequest(gw, req, res, url, q, urlPath, upgradeHead);
      if (x === undefined) return;
      if (x.api.keyless) limit(x);
      else if (x.api.oauth !== undefined) authenticateBearer(x, x.api.oauth);
      else authenticateKey(x);
    } catch (e) {
      gw.fail(res, e);
    }
  }

  return { handle, upstreams: gw.upstreams, h2Upstreams: gw.h2Upstreams, tunnels: gw.tunnels };
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
      keepAliveTimeout: GATEWAY_KEEP_ALIVE_MS,
      // no cap on a request's whole duration: node's default (300 s) cut uploads that were still flowing
      // with a 408; slow heads are still cut (headersTimeout: headers_timeout, 60 s, set by listen(); this
      // one for a server listened on directly, as requestTimeout 0 also made node's default 0)
      requestTimeout: 0,
      headersTimeout: 60_000,
      // the gateway answers a request without Host itself (400 JSON; node's own 400 had an empty body)
      requireHostHeader: false,
      shouldUpgradeCallback: tunnelsUpgrade,
    },
    // node passes (req, res): no upgrade head; a pipelined request waits for the one ahead of it
    oneAtATime(handle, PIPELINED_MAX),
  );
  // Upgrade (WebSocket…): the same checks, then a tunnel to the upstream (upgrade.ts)
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on('error', () => undefined); // a client gone mid-handshake: nothing to answer
    handle(req, upgradeResponse(req, socket), head);
  });
  server.on(DRAIN_DEADLINE, () => tunnels.closeAll());
  answerClientErrorsWithJson(server, (_status, reason) => ({ error: reason }));
  // TLS, h2c: the connections handed to the protocol they speak (protocols.ts); HTTP/2 requests reach handle too
  const protocols = attachProtocols(server, handle, {
    tls: deps.tls,
    h2c: deps.h2c ?? true,
    http2: deps.http2,
    logger: deps.logger,
  });
  return {
    server,
    close: async () => {
      protocols.stop();
      tunnels.closeAll();
      await Promise.all([upstreams.close(), h2Upstreams.close()]);
    },
  };
}
