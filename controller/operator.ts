/**
 * The controller's wiring: informers → dispatch (dispatch.ts: each event to the watches the reconcilers
 * declare, reconcilers.ts) → the work queue of typed items (work-items.ts) → the reconcilers. Informers run
 * on every replica (a follower's cache is warm); the queue runs only on the leader, and a new leader starts
 * with a full resync (resync.ts). Full resyncs also run every resync period, when Redis comes back after a
 * disconnect, and after the store marker (store-marker.ts) found the store emptied and restored it, so Redis
 * drift is repaired within seconds and any other drift within one resync period.
 */
import type { Tracing } from '../lib/trace/otel.js';
import { SECRET_LABEL } from '../contract/annotations.js';
import type { Logger } from '../lib/logger.js';
import { RedisSessionStore } from '../stores/sessions-redis.js';
import type { StoreClient } from '../lib/store/redis.js';
import { MANAGED_BY, REFS, StoreUnavailable, type Informers, type OperatorContext } from './context.js';
import { EventRecorder } from './events.js';
import { Informer, type ResourceRef } from '../lib/kube/informer.js';
import { createKubeApi, type KubeApi } from '../lib/kube/api.js';
import type { KubeConnection } from '../lib/kube/connection.js';
import { kubeLeaseClient, LeaderElector } from './leader-election.js';
import { OperatorMetrics } from './metrics.js';
import { ConfigStatusPlans } from './config-status.js';
import { SmoothingEvents } from './smoothing-events.js';
import { StatusWriter } from './status.js';
import { WorkQueue } from './work-queue.js';
import { SecretIndex } from './secret-index.js';
import { ApiIdIndex } from './api-index.js';
import { KeyMemos } from './key-memo.js';
import { SettledConfigs } from './config-settled.js';
import { itemKey, itemOfResource, type WorkItem } from './work-items.js';
import { reconcilers } from './reconcilers.js';
import { Dispatcher } from './dispatch.js';
import { KeyAudit } from './key-audit.js';
import { fullResync, type ResyncOptions } from './resync.js';
import { StoreMarker } from './store-marker.js';
import type { WatchedKind } from './watches.js';
const { randomUUID } = process.getBuiltinModule('node:crypto');
const { setTimeout: delay } = process.getBuiltinModule('node:timers/promises');

const MANAGED_BY_SELECTOR = Object.entries(MANAGED_BY)
  .map(([k, v]) => `${k}=${v}`)
  .join(',');

export interface OperatorOptions {
  conn: KubeConnection;
  logger: Logger;
  namespace?: string;
  redis?: StoreClient;
  leaderElect?: boolean;
  leaseNamespace?: string;
  leaseName?: string;
  leaseDurationMs?: number;
  identity?: string;
  resyncMs?: number;
  storeCheckMs?: number;
  concurrency?: number;
  metrics?: OperatorMetrics;
  /** Bytes per config ConfigMap (tests; default reconcile-config.ts SHARD_BUDGET_BYTES). */
  shardBudget?: number;
  /** Each reconcile is a span (OTEL_EXPORTER_OTLP_ENDPOINT); absent: no spans. */
  tracing?: Tracing;
}

export class Operator {
  readonly metrics: OperatorMetrics;
  readonly identity: string;
  private readonly api: KubeApi;
  private readonly informers: Informers;
  private readonly queue: WorkQueue<WorkItem>;
  private readonly ctx: OperatorContext;
  private readonly dispatcher: Dispatcher;
  private readonly resync: ResyncOptions;
  private readonly marker?: StoreMarker;
  private readonly elector?: LeaderElector;
  private readonly smoothing?: SmoothingEvents;
  private leading = false;
  private synced = false;
  private timers: NodeJS.Timeout[] = [];
  private redisSeenReady = false;

  constructor(private readonly o: OperatorOptions) {
    this.metrics = o.metrics ?? new OperatorMetrics();
    this.identity = o.identity ?? `${process.env.HOSTNAME ?? 'gw-controller'}-${randomUUID().slice(0, 8)}`;
    this.api = createKubeApi(o.conn);
    const mk = (resource: ResourceRef, extra: { fieldSelector?: string; labelSelector?: string } = {}): Informer =>
      new Informer({
        api: this.api,
        resource,
        namespace: o.namespace,
        logger: o.logger,
        onChange: (t, obj, old) => this.dispatcher.onEvent(resource.kind as WatchedKind, t, obj, old),
        ...extra,
      });
    this.informers = {
      apis: mk(REFS.ApiDefinition),
      policies: mk(REFS.Policy),
      keys: mk(REFS.AccessKey),
      clients: mk(REFS.OAuthClient),
      // only Secrets labelled gw.io/secret (generated ones, the facade's, a user's who opts in): an unrelated
      // Secret of the cluster never enters this process; other referenced Secrets are read by name
      secrets: mk(REFS.Secret, { labelSelector: SECRET_LABEL }),
      // the config ConfigMaps it writes (gw-config, gw-config-<n>) carry its managed-by label
      configMaps: mk(REFS.ConfigMap, { labelSelector: MANAGED_BY_SELECTOR }),
    };
    const sessions = o.redis ? new RedisSessionStore(o.redis, o.logger) : undefined;
    this.ctx = {
      api: this.api,
      logger: o.logger,
      metrics: this.metrics,
      informers: this.informers,
      redis: o.redis,
      sessions,
      status: new StatusWriter(this.api, () => this.metrics.writes.inc({ target: 'status' })),
      events: new EventRecorder(this.api, this.identity, o.logger, () => this.metrics.writes.inc({ target: 'event' })),
      configs: new Map(),
      refused: new Map(),
      statusPlans: new ConfigStatusPlans(),
      shardBudget: o.shardBudget,
      keyOwners: new Map(),
      keyMemos: new KeyMemos(),
      settled: new SettledConfigs(),
      apiIds: new ApiIdIndex(),
      scope: o.namespace,
      requeue: (kind, ns, name) => {
        const item = itemOfResource(kind, ns, name);
        if (item) this.queue.add(item);
      },
    };
    this.queue = new WorkQueue<WorkItem>({
      concurrency: o.concurrency ?? 32,
      keyOf: itemKey,
      handler: (item) => this.dispatcher.run(item),
      onError: (key, err, attempt, retryInMs) => {
        const log =
          err instanceof StoreUnavailable || attempt < 3 ? o.logger.warn.bind(o.logger) : o.logger.error.bind(o.logger);
        // "resource", not "key": the logger redacts every field named key
        log({ resource: key, attempt, retryInMs, err: (err as Error).message }, 'reconcile failed; retrying');
      },
    });
    this.metrics.depth = () => this.queue.depth();
    const leading = (): boolean => this.leading;
    const synced = (): boolean => this.synced;
    this.dispatcher = new Dispatcher({
      reconcilers,
      ctx: this.ctx,
      queue: this.queue,
      secretIndex: new SecretIndex(),
      synced,
      tracing: o.tracing,
    });
    this.resync = {
      ctx: this.ctx,
      queue: this.queue,
      audit: new KeyAudit({ ctx: this.ctx, queue: this.queue, leading }),
      synced,
    };
    if (o.redis) {
      this.marker = new StoreMarker({
        redis: o.redis,
        scope: o.namespace,
        identity: this.identity,
        logger: o.logger,
        metrics: this.metrics,
        keys: this.informers.keys,
        leading,
        synced,
        resync: (cause) => this.fullResync(cause),
      });
    }
    if (o.leaderElect) {
      this.elector = new LeaderElector({
        client: kubeLeaseClient(this.api, o.leaseNamespace ?? o.namespace ?? 'default', o.leaseName ?? 'gw-controller'),
        identity: this.identity,
        leaseDurationMs: o.leaseDurationMs,
        logger: o.logger,
        onStartedLeading: () => this.startLeading(),
        onStoppedLeading: () => this.stopLeading(),
      });
    }
    if (o.redis) this.smoothing = new SmoothingEvents(o.redis, this.ctx, leading, o.logger);
  }

  ready(): boolean {
    return this.synced && (!this.o.redis || this.o.redis.status === 'ready');
  }

  async start(): Promise<void> {
    for (const inf of Object.values(this.informers)) inf.start();
    if (this.o.redis) {
      this.o.redis.on('ready', () => {
        this.o.logger.info(this.redisSeenReady ? 'Redis reconnected: full resync' : 'Redis connected');
        this.redisSeenReady = true;
        void this.marker?.check(); // a server back empty: restore before the resync
        this.fullResync('redis');
      });
      void this.smoothing?.start(); // subscribes whenever Redis is reachable; never blocks start-up
    }
    await Promise.all(Object.values(this.informers).map((i: Informer) => i.whenSynced()));
    this.synced = true;
    // Key ownership survives restarts in status.keyHash: seed the index before any reconcile, so a
    // duplicate key stays refused and a deletion never removes a session another AccessKey owns.
    for (const k of this.informers.keys.list()) {
      const h = (k as { status?: { keyHash?: unknown } }).status?.keyHash;
      if (typeof h === 'string' && !k.metadata.deletionTimestamp && !this.ctx.keyOwners.has(h))
        this.ctx.keyOwners.set(h, `${k.metadata.namespace}/${k.metadata.name}`);
    }
    this.o.logger.info(
      {
        apis: this.informers.apis.size(),
        policies: this.informers.policies.size(),
        keys: this.informers.keys.size(),
        clients: this.informers.clients.size(),
      },
      'caches synced',
    );
    const every = (ms: number, fn: () => void): void => {
      const t = setInterval(fn, ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.o.resyncMs ?? 60_000, () => this.fullResync('periodic'));
    if (this.marker) every(this.o.storeCheckMs ?? 1_000, () => void this.marker?.check());
    if (this.elector) {
      this.metrics.leader.set(0);
      this.elector.start();
    } else this.startLeading();
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.queue.stop();
    const drained = new AbortController();
    await Promise.race([this.queue.idle(), delay(5000, undefined, { signal: drained.signal }).catch(() => undefined)]);
    drained.abort(); // the 5 s timer must not keep a stopped controller's process alive
    await this.elector?.stop(true);
    for (const inf of Object.values(this.informers)) inf.stop();
    await this.smoothing?.stop();
  }

  /** `namespace/name` of every Secret in the controller's cache (diagnostics, tests): labelled ones only. */
  cachedSecrets(): string[] {
    return this.informers.secrets.list().map((s) => `${s.metadata.namespace ?? ''}/${s.metadata.name}`);
  }

  /** Waits until nothing is queued or running (tests). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  /** Everything checked again, behind every live change (resync.ts). */
  fullResync(cause: string): void {
    fullResync(this.resync, cause);
  }

  private startLeading(): void {
    this.leading = true;
    this.metrics.leader.set(1);
    this.queue.start();
    this.fullResync('leader');
    void this.marker?.check();
  }

  private stopLeading(): void {
    this.leading = false;
    this.metrics.leader.set(0);
    this.queue.stop();
    this.queue.clear();
  }
}
