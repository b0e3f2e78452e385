/** The controller's Prometheus metrics (its own registry; served at --metrics-listen /metrics). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerBuildInfo } from '../lib/build-info-metric.js';

export class OperatorMetrics {
  readonly registry = new Registry();
  readonly reconciles = new Counter({
    name: 'gw_controller_reconciles_total',
    help: 'Reconciles by kind and result (success, error, invalid, not_ready)',
    labelNames: ['kind', 'result'] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'gw_controller_reconcile_duration_seconds',
    help: 'Reconcile latency by kind',
    labelNames: ['kind'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  /** Set by the operator: the queue's current depth. */
  depth: () => number = () => 0;
  readonly queueDepth: Gauge = new Gauge({
    name: 'gw_controller_queue_depth',
    help: 'Keys waiting in the work queue',
    registers: [this.registry],
    collect: (): void => this.queueDepth.set(this.depth()),
  });
  readonly leader = new Gauge({
    name: 'gw_controller_leader',
    help: '1 while this controller is the leader (or leader election is off)',
    registers: [this.registry],
  });
  readonly writes = new Counter({
    name: 'gw_controller_writes_total',
    help: 'Writes by target: session, session_delete, client, client_delete, quota_reset, configmap, configmap_delete, status, finalizer, secret, event',
    labelNames: ['target'] as const,
    registers: [this.registry],
  });
  readonly resyncs = new Counter({
    name: 'gw_controller_resyncs_total',
    help: 'Full resyncs by cause (periodic, redis, leader)',
    labelNames: ['cause'] as const,
    registers: [this.registry],
  });
  readonly restores = new Counter({
    name: 'gw_controller_store_restores_total',
    help: 'Bulk restores of the sessions into a store that lost its data (marker key missing)',
    registers: [this.registry],
  });
  readonly restoreSeconds = new Gauge({
    name: 'gw_controller_store_restore_seconds',
    help: 'Duration of the last bulk restore of the sessions',
    registers: [this.registry],
  });
  readonly configShards = new Gauge({
    name: 'gw_controller_config_shards',
    help: 'ConfigMaps holding the compiled config of a namespace (1: inline in gw-config)',
    labelNames: ['namespace'] as const,
    registers: [this.registry],
  });
  readonly configRefused = new Gauge({
    name: 'gw_controller_config_refused',
    help: 'ApiDefinitions and Policies of a namespace not served because they fit no ConfigMap shard (Ready=False ConfigTooLarge)',
    labelNames: ['namespace'] as const,
    registers: [this.registry],
  });
  readonly configParsed = new Counter({
    name: 'gw_controller_config_parsed_total',
    help: 'ApiDefinitions and Policies validated and compiled anew by config reconciles, by kind (the others come from the cache: an edit costs what changed)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly unchanged = new Counter({
    name: 'gw_controller_unchanged_total',
    help: 'Reconciles and resync checks that found the resource, its inputs and what it wrote as last reconciled, and did nothing (no validation, compile or write), by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly validated = new Counter({
    name: 'gw_controller_validated_total',
    help: 'AccessKeys and OAuthClients validated by a full reconcile, by kind (an unchanged one costs none)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly smoothingEvents = new Counter({
    name: 'gw_controller_smoothing_events_total',
    help: 'Smoothing events received from sidecars, by event',
    labelNames: ['event'] as const,
    registers: [this.registry],
  });

  readonly traceExportFailures = new Counter({
    name: 'gw_trace_export_failures_total',
    help: 'Span exports to the OpenTelemetry collector that failed (the spans of each are lost)',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'gw_controller_' });
    registerBuildInfo(this.registry);
  }
}
