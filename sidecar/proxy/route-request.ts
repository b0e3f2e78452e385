/**
 * The route step: the API whose listen path is the longest prefix of the request's path (router.ts), or
 * a 404; a routed request becomes its Exchange, which the observer (spans, access log) begins with.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Gateway } from './gateway.js';
import { newExchange, type Exchange } from './exchange.js';
import type { Observed } from './observe.js';
import { ERRORS, answer, isGrpc } from './respond.js';
import { route } from './router.js';

/** The request's Exchange, or undefined once it is answered 404 (no API on the path, or an inactive one). */
export function routeRequest(
  gw: Gateway,
  req: IncomingMessage,
  res: ServerResponse,
  url: string,
  q: number,
  urlPath: string,
  upgradeHead: Buffer | undefined,
): Exchange | undefined {
  const config = gw.deps.config();
  const r = route(config.apis, urlPath);
  const { observer } = gw;
  if (!r || !r.api.active) {
    gw.metrics.request(r ? r.api.api_id : '', 404); // no API on the path: api=""
    if (observer !== undefined) observer.begin(unrouted(req, res, urlPath));
    answer(res, 404, { error: ERRORS.notFound });
    return undefined;
  }
  // a gRPC call: endpoint rules and allowed_urls see its whole method path (/package.Service/Method),
  // and it is forwarded unstripped (a gRPC server serves that path), whatever the listen path
  const grpc = req.httpVersionMajor === 2 && isGrpc(req);
  const x = newExchange(gw, req, res, r.api, config, url, q, urlPath, grpc ? urlPath : r.relPath, upgradeHead);
  if (observer !== undefined) observer.begin(x);
  return x;
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
