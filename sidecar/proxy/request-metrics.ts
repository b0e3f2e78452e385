/**
 * The metric writes of every request: the protocol it came over, its status class per API, the decision's
 * time, a refusal by scope, the upstream's latency per API. Labelled children are resolved once per API (and status class) instead of on every
 * request; per API one child per status class (index status / 100), so no key string is built per request.
 */
import type { IncomingMessage } from 'node:http';
import type { GatewayMetrics } from '../metrics.js';
import { isGrpc } from './respond.js';

const STATUS_CLASS = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

export class RequestMetrics {
  private readonly h1: { inc(): void };
  private readonly h2: { inc(): void };
  private readonly grpc: { inc(): void };
  private readonly requests = new Map<string, ({ inc(): void } | undefined)[]>();
  private readonly upstreams = new Map<string, { observe(v: number): void }>();

  constructor(private readonly metrics: GatewayMetrics) {
    this.h1 = metrics.requestsByProtocol.labels({ protocol: '1.1' });
    this.h2 = metrics.requestsByProtocol.labels({ protocol: '2' });
    this.grpc = metrics.requestsByProtocol.labels({ protocol: 'grpc' });
  }

  /** gw_requests_by_protocol: HTTP/1.x, HTTP/2, or a gRPC call over HTTP/2. */
  protocol(req: IncomingMessage): void {
    if (req.httpVersionMajor !== 2) this.h1.inc();
    else (isGrpc(req) ? this.grpc : this.h2).inc();
  }

  /** gw_requests_total of an API ('': a path no API serves) and a status. */
  request(apiId: string, status: number): void {
    const cls = Math.floor(status / 100);
    let byClass = this.requests.get(apiId);
    if (!byClass) {
      if (this.requests.size > 10_000) this.requests.clear();
      this.requests.set(apiId, (byClass = []));
    }
    let c = byClass[cls];
    if (!c) {
      const code = STATUS_CLASS[cls] ?? `${cls}xx`;
      c = this.metrics.requests.labels({ api: this.metrics.apiLabel(apiId), code });
      if (cls >= 0 && cls < STATUS_CLASS.length) byClass[cls] = c;
    }
    c.inc();
  }

  /** gw_decision_seconds: the limiter engine's decision. */
  decision(seconds: number): void {
    this.metrics.decision.observe(seconds);
  }

  /** A refusal by the engine: gw_quota_exceeded_total, gw_rate_limiter_unavailable_total or gw_rate_limited_total (an `auth` one: none). */
  refused(apiId: string, scope: string): void {
    const m = this.metrics;
    const label = m.apiLabel(apiId);
    if (scope === 'quota') m.quotaExceeded.inc({ api: label });
    else if (scope === 'unavailable') m.rateLimiterUnavailable.inc({ api: label });
    else if (scope !== 'auth') m.rateLimited.inc({ api: label, scope });
  }

  /** gw_upstream_seconds of an API. */
  upstream(apiId: string, seconds: number): void {
    let h = this.upstreams.get(apiId);
    if (!h) {
      if (this.upstreams.size > 10_000) this.upstreams.clear();
      this.upstreams.set(apiId, (h = this.metrics.upstream.labels({ api: this.metrics.apiLabel(apiId) })));
    }
    h.observe(seconds);
  }
}
