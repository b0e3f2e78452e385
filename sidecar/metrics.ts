/** Prometheus metrics of the gateway (prom-client). Labels carry api ids and scopes, never keys. */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { registerBuildInfo } from '../lib/build-info-metric.js';
import { HotCounter, HotHistogram } from './hot-metrics.js';

/** APIs that get their own `api` label value on the per-API series; later ones share API_OTHER. */
export const MAX_API_SERIES = 1_000;
export const API_OTHER = '_other';

export class GatewayMetrics {
  readonly registry = new Registry();
  // written on every request: plain numbers read at scrape time (hot-metrics.ts)
  readonly requests = new HotCounter(
    'gw_requests_total',
    'Requests by API and status class',
    ['api', 'code'],
    this.registry,
  );
  readonly requestsByProtocol = new HotCounter(
    'gw_requests_protocol_total',
    'Gateway requests by protocol: 1.1, 2 (HTTP/2 over TLS or h2c), grpc (gRPC over HTTP/2)',
    ['protocol'],
    this.registry,
  );
  readonly rateLimited = new Counter({
    name: 'gw_rate_limited_total',
    help: 'Requests refused by a rate limit, by API and scope',
    labelNames: ['api', 'scope'],
    registers: [this.registry],
  });
  readonly quotaExceeded = new Counter({
    name: 'gw_quota_exceeded_total',
    help: 'Requests refused by a quota',
    labelNames: ['api'],
    registers: [this.registry],
  });
  readonly decision = new HotHistogram(
    'gw_decision_seconds',
    'Time to decide allow/deny',
    [],
    [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    this.registry,
  ); // up to past the store deadline (1 s)
  readonly upstream = new HotHistogram(
    'gw_upstream_seconds',
    'Upstream latency',
    ['api'],
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    this.registry,
  );
  readonly storeErrors = new Counter({
    name: 'gw_store_errors_total',
    help: 'Errors talking to the shared store',
    registers: [this.registry],
  });
  readonly drlPeers = new Gauge({
    name: 'gw_drl_peers',
    help: 'Live gateways in the DRL group',
    registers: [this.registry],
  });
  readonly drlFallback = new Gauge({
    name: 'gw_drl_fallback',
    help: 'DRL without the shared store: 1 while limits are split evenly over the last known peers, else 0',
    registers: [this.registry],
  });
  readonly drlFallbacks = new Counter({
    name: 'gw_drl_fallbacks_total',
    help: 'Times the DRL lost the shared store and fell back to an even split over the last known peers',
    registers: [this.registry],
  });
  readonly smoothingAllowance = new Gauge({
    name: 'gw_smoothing_allowance',
    help: 'Current smoothing allowance',
    labelNames: ['api'],
    registers: [this.registry],
  });
  readonly smoothingEvents = new Counter({
    name: 'gw_smoothing_events_total',
    help: 'Smoothing events',
    labelNames: ['api', 'event'],
    registers: [this.registry],
  });
  readonly smoothingRefused = new Counter({
    name: 'gw_smoothing_refused_total',
    help: 'Limits whose smoothing the active limiter cannot apply (reported once per bucket)',
    labelNames: ['api'],
    registers: [this.registry],
  });
  readonly configErrors = new Counter({
    name: 'gw_config_errors_total',
    help: 'Resources or configs refused',
    registers: [this.registry],
  });
  readonly traceExportFailures = new Counter({
    name: 'gw_trace_export_failures_total',
    help: 'Span exports to the OpenTelemetry collector that failed (the spans of each are lost)',
    registers: [this.registry],
  });
  readonly accessLogDropped = new Counter({
    name: 'gw_access_log_dropped_total',
    help: 'Access log lines dropped because stdout did not drain (16 MiB of lines were waiting)',
    registers: [this.registry],
  });
  /** Per-client buckets (limit_by) held in process, read at scrape time (the runtime sets the source). */
  clientBucketCount: () => number = () => 0;
  readonly clientBuckets: Gauge = new Gauge({
    name: 'gw_client_buckets',
    help: 'Per-client limit buckets (limit_by ip or header) held in process (at most max_client_buckets)',
    registers: [this.registry],
    collect: (): void => this.clientBuckets.set(this.clientBucketCount()),
  });
  readonly clientBucketsEvicted = new Counter({
    name: 'gw_client_buckets_evicted_total',
    help: 'Per-client limit buckets evicted (least recently used) to stay within max_client_buckets',
    registers: [this.registry],
  });
  readonly configLoaded = new Gauge({
    name: 'gw_config_apis',
    help: 'APIs in the active config',
    registers: [this.registry],
  });

  readonly rateLimiterUnavailable = new Counter({
    name: 'gw_rate_limiter_unavailable_total',
    help: 'Requests refused because a limit needs the shared store and it is unreachable (kv_failure_mode closed)',
    labelNames: ['api'],
    registers: [this.registry],
  });

  /** gw_store_up: 1 while the shared store is connected, 0 while it is not (read at scrape time). */
  trackStore(client: { status: string }): void {
    new Gauge({
      name: 'gw_store_up',
      help: 'Whether the shared store is reachable (1) or not (0); readiness does not depend on it',
      registers: [this.registry],
      collect() {
        this.set(client.status === 'ready' ? 1 : 0);
      },
    });
  }

  readonly oauthTokensIssued = new Counter({
    name: 'gw_oauth_tokens_issued_total',
    help: 'OAuth access tokens issued by the token endpoint, by API and grant',
    labelNames: ['api', 'grant'],
    registers: [this.registry],
  });
  readonly oauthErrors = new Counter({
    name: 'gw_oauth_token_errors_total',
    help: 'OAuth errors by API and error code (token, authorize and revoke endpoints; invalid_token on API calls)',
    labelNames: ['api', 'error'],
    registers: [this.registry],
  });

  /** APIs with their own `api` label value so far; the others share API_OTHER (docs/observability.md). */
  private readonly labelledApis = new Set<string>();
  readonly apisAggregated = new Counter({
    name: 'gw_metrics_apis_aggregated_total',
    help: `APIs whose per-API series are counted under api="${API_OTHER}" (more than ${MAX_API_SERIES} APIs saw traffic)`,
    registers: [this.registry],
  });
  private readonly aggregated = new Set<string>();

  /**
   * The `api` label value of an API: its api_id for the first MAX_API_SERIES APIs that see traffic, then
   * API_OTHER, so a scrape stays bounded (size and time) however many APIs a gateway serves.
   */
  apiLabel(apiId: string): string {
    if (this.labelledApis.has(apiId)) return apiId;
    if (this.labelledApis.size < MAX_API_SERIES) {
      this.labelledApis.add(apiId);
      return apiId;
    }
    if (this.aggregated.size < 1_000_000 && !this.aggregated.has(apiId)) {
      this.aggregated.add(apiId);
      this.apisAggregated.inc();
    }
    return API_OTHER;
  }

  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry });
    registerBuildInfo(this.registry);
  }
}
