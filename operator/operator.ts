/**
 * The operator: informers → work queue → reconcilers. Queue keys are `Config|<ns>` (the namespace's
 * compiled config), `ConfigStatus|<ns>` (its ApiDefinition/Policy statuses, queued by each Config run),
 * `AccessKey|<ns>|<name>` and `OAuthClient|<ns>|<name>`.
 * Informers run on every replica (a follower's cache is warm); the queue runs only on the leader, and a
 * new leader starts with a full resync. Full resyncs also run every resync period, when Redis comes
 * back after a disconnect, and when the store marker key vanished (FLUSHALL / failover to an empty
 * replica), so Redis drift is repaired within seconds and any other drift within one resync period.
 * An emptied store (marker missing, checked every second and on each reconnect) first gets every
 * session back in one pipelined bulk write (restore.ts) under the marker `restoring:`, then `ready:`;
 * gateways hold on to the sessions they have seen until it says `ready:` (contract/store-keys.ts).
 */
import type { Tracing } from '../lib/trace/otel.js';
import { SECRET_LABEL } from '../contract/annotations.js';
import type { Logger } from '../lib/logger.js';
import { RedisSessionStore } from '../contract/sessions-redis.js';
import type { StoreClient } from '../lib/store/redis.js';
import { CONFIG_MAP_NAME } from '../contract/config-schema.js';
import { shardIndexOf } from '../contract/config-shards.js';
import { MANAGED_BY, REFS, StoreUnavailable, type Informers, type OperatorContext } from './context.js';
import { EventRecorder } from './events.js';
import { Informer, type ChangeType, type KubeObject, type ResourceRef } from '../lib/kube/informer.js';
import { createKubeApi, type KubeApi } from '../lib/kube/api.js';
import type { KubeConnection } from '../lib/kube/connection.js';
import { kubeLeaseClient, LeaderElector } from './leader-election.js';
import { OperatorMetrics } from './metrics.js';
import { reconcileClient } from './reconcile-client.js';
import { policiesOf, reconcileConfig } from './reconcile-config.js';
import { ConfigStatusPlans } from './config-status.js';
import { reconcileKey } from './reconcile-key.js';
import { SmoothingEvents } from './smoothing-events.js';
import { StatusWriter } from './status.js';
import { WorkQueue } from './work-queue.js';
import { SecretIndex } from './secret-index.js';
import { ApiIdIndex } from './api-index.js';
import { markerComplete, markerReady, markerRestoring, storeMarkerKey } from '../contract/store-keys.js';
import { restoreSessions } from './restore.js';
import { KeyMemos } from './key-memo.js';
import { SettledConfigs } from './config-settled.js';
import { SESSION_PREFIX } from '../contract/sessions-redis.js';
const { randomUUID } = process.getBuiltinModule('node:crypto');
const { setTimeout: delay } = process.getBuiltinModule('node:timers/promises');

/** AccessKeys whose sessions one store read of a resync compares. */
const AUDIT_BATCH = 500;

/** The values of `keys`: one MGET on a single server; on a cluster, GETs (the keys' slots differ). */
async function readSessions(redis: StoreClient, keys: string[]): Promise<(string | null)[]> {
  if ('nodes' in redis) return Promise.all(keys.map((k) => redis.get(k)));
  return redis.mget(...keys);
}

const MANAGED_BY_SELECTOR = Object.entries(MANAGED_BY)
  .map(([k, v]) => `${k}=${v}`)
  .join(',');

export { storeMarkerKey } from '../contract/store-keys.js';

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
  private readonly queue: WorkQueue;
  private readonly ctx: OperatorContext;
  private readonly elector?: LeaderElector;
  private readonly smoothing?: SmoothingEvents;
  private readonly secretIndex = new SecretIndex();
  private leading = false;
  private synced = false;
  private timers: NodeJS.Timeout[] = [];
  private redisSeenReady = false;
  private restoring = false;
  /** A key audit is running (fullResync), and whether another was asked for meanwhile. */
  private auditing = false;
  private auditAgain = false;

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
        onChange: (t, obj, old) => this.onChange(resource.kind, t, obj, old),
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
      requeue: (kind, ns, name) =>
        this.queue.add(kind === 'ApiDefinition' || kind === 'Policy' ? `Config|${ns}` : `${kind}|${ns}|${name}`),
    };
    this.queue = new WorkQueue({
      concurrency: o.concurrency ?? 32,
      handler: (k) => this.reconcile(k),
      onError: (key, err, attempt, retryInMs) => {
        const log =
          err instanceof StoreUnavailable || attempt < 3 ? o.logger.warn.bind(o.logger) : o.logger.error.bind(o.logger);
        // "resource", not "key": the logger redacts every field named key
        log({ resource: key, attempt, retryInMs, err: (err as Error).message }, 'reconcile failed; retrying');
      },
    });
    this.metrics.depth = () => this.queue.depth();
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
    if (o.redis) this.smoothing = new SmoothingEvents(o.redis, this.ctx, () => this.leading, o.logger);
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
        void this.checkStoreMarker(); // a server back empty: restore before the resync
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
    if (this.o.redis) every(this.o.storeCheckMs ?? 1_000, () => void this.checkStoreMarker());
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

  private startLeading(): void {
    this.leading = true;
    this.metrics.leader.set(1);
    this.queue.start();
    this.fullResync('leader');
    void this.checkStoreMarker();
  }

  private stopLeading(): void {
    this.leading = false;
    this.metrics.leader.set(0);
    this.queue.stop();
    this.queue.clear();
  }

  /**
   * Everything checked again: every namespace's config, every key, every client. What is as the last
   * reconcile left it costs a comparison, not a reconcile: a namespace whose ApiDefinitions, Policies,
   * ConfigMaps and keys are the versions its last complete config reconcile left is not queued
   * (config-settled.ts); an AccessKey whose memo holds (key-memo.ts) has its session compared with the store's
   * in batches (auditKeys) and is queued only when it differs. The rest is queued behind every live change.
   */
  fullResync(cause: string): void {
    if (!this.synced) return;
    this.metrics.resyncs.inc({ cause });
    const namespaces = new Set<string>();
    for (const inf of [this.informers.apis, this.informers.policies, this.informers.configMaps]) {
      for (const o of inf.list()) namespaces.add(o.metadata.namespace ?? 'default');
    }
    // behind every live change: a resync of tens of thousands of keys never delays an edit
    for (const ns of namespaces) {
      if (this.ctx.settled.holds(this.informers, ns)) this.metrics.unchanged.inc({ kind: 'Config' });
      else this.queue.add(`Config|${ns}`, 'bulk');
    }
    void this.auditKeys();
    for (const o of this.informers.clients.list())
      this.queue.add(`OAuthClient|${o.metadata.namespace}|${o.metadata.name}`, 'bulk');
  }

  /**
   * Every AccessKey against its memo and the store: one MGET per AUDIT_BATCH keys whose memo holds (on a
   * cluster, the GETs of a batch pipelined per master), the key queued (bulk) when its session differs or it has
   * no memo. A store error queues the batch. One audit at a time; a resync asked for meanwhile runs another.
   */
  private async auditKeys(): Promise<void> {
    if (this.auditing) {
      this.auditAgain = true;
      return;
    }
    this.auditing = true;
    try {
      do {
        this.auditAgain = false;
        const keys = this.informers.keys.list();
        for (let i = 0; i < keys.length && this.leading; i += AUDIT_BATCH) {
          const checks: { queueKey: string; ns: string; name: string; hash: string; json: string }[] = [];
          for (const raw of keys.slice(i, i + AUDIT_BATCH)) {
            const ns = raw.metadata.namespace ?? 'default';
            const queueKey = `AccessKey|${ns}|${raw.metadata.name}`;
            const memo = this.o.redis ? this.ctx.keyMemos.current(this.ctx, raw) : undefined;
            if (memo) checks.push({ queueKey, ns, name: raw.metadata.name, hash: memo.hash, json: memo.json });
            else this.queue.add(queueKey, 'bulk');
          }
          if (!checks.length) continue;
          let stored: (string | null)[] | undefined;
          try {
            stored = await readSessions(
              this.o.redis!,
              checks.map((c) => SESSION_PREFIX + c.hash),
            );
          } catch {
            stored = undefined; // the reconciles report the store's state
          }
          checks.forEach((c, j) => {
            if (stored?.[j] === c.json) return void this.metrics.unchanged.inc({ kind: 'AccessKey' });
            this.ctx.keyMemos.forget(c.ns, c.name);
            this.queue.add(c.queueKey, 'bulk');
          });
        }
      } while (this.auditAgain && this.leading);
    } finally {
      this.auditing = false;
    }
  }

  /**
   * The marker key in Redis: gone → the store lost its data (FLUSHALL, an empty restart or replica): the
   * sessions are restored in bulk, the marker says `ready:`, then a full resync. A marker left at
   * `restoring:` (a leader that died mid-restore, a store lost again) is restored again.
   */
  private async checkStoreMarker(): Promise<void> {
    const redis = this.o.redis;
    if (!redis || !this.leading || !this.synced || redis.status !== 'ready' || this.restoring) return;
    const key = storeMarkerKey(this.o.namespace);
    this.restoring = true;
    try {
      let current = await redis.get(key);
      if (markerComplete(current)) return;
      if (current === null && (await redis.set(key, markerRestoring(this.identity), 'NX')) !== 'OK') {
        current = await redis.get(key); // written meanwhile (another controller of this scope)
        if (markerComplete(current)) return;
      }
      if (current === null) this.o.logger.info('store marker missing (new or emptied store): restoring sessions');
      else await redis.set(key, markerRestoring(this.identity));
      const t0 = performance.now();
      const n = await restoreSessions(redis, this.informers.keys.list());
      await redis.set(key, markerReady(this.identity));
      const seconds = (performance.now() - t0) / 1000;
      this.metrics.restoreSeconds.set(seconds);
      this.metrics.restores.inc();
      this.o.logger.info({ sessions: n, ms: Math.round(seconds * 1000) }, 'store restored: full resync');
      this.fullResync('redis');
    } catch (e) {
      this.o.logger.warn({ err: (e as Error).message }, 'store restore interrupted; retried within a second');
    } finally {
      this.restoring = false;
    }
  }

  private async reconcile(queueKey: string): Promise<void> {
    const [kind, ns, name] = queueKey.split('|') as [string, string, string | undefined];
    const end = this.metrics.latency.startTimer({ kind });
    const span = this.o.tracing?.startChild(`reconcile ${kind}`, undefined, {
      'gw.kind': kind,
      'k8s.namespace.name': ns,
      ...(name !== undefined ? { 'gw.resource.name': name } : {}),
    });
    try {
      if (kind === 'Config') {
        await reconcileConfig(this.ctx, ns);
        this.queue.add(`ConfigStatus|${ns}`);
      } else if (kind === 'ConfigStatus') await this.ctx.statusPlans.write(this.ctx, ns);
      else if (kind === 'AccessKey') await reconcileKey(this.ctx, ns, name!);
      else if (kind === 'OAuthClient') await reconcileClient(this.ctx, ns, name!);
      this.metrics.reconciles.inc({ kind, result: 'success' });
    } catch (e) {
      this.metrics.reconciles.inc({ kind, result: e instanceof StoreUnavailable ? 'store_unavailable' : 'error' });
      span?.setStatus({ code: 2 /* ERROR */, message: (e as Error)?.message ?? String(e) });
      throw e;
    } finally {
      end();
      span?.end();
    }
  }

  private onChange(kind: string, type: ChangeType, obj: KubeObject, old?: KubeObject): void {
    const ns = obj.metadata.namespace ?? 'default';
    const name = obj.metadata.name;
    const specChanged = type !== 'update' || !old || old.metadata.generation !== obj.metadata.generation;
    const lifecycleChanged =
      specChanged ||
      old?.metadata.deletionTimestamp !== obj.metadata.deletionTimestamp ||
      JSON.stringify(old?.metadata.annotations ?? {}) !== JSON.stringify(obj.metadata.annotations ?? {});
    // the caches' first list (every object an "add"): the indexes learn them, and the full resync that
    // follows the sync queues everything as bulk work — queued here, each object would be live work, and a
    // change made during the start-up pass would wait for all of it
    const listing = !this.synced;
    switch (kind) {
      case 'ApiDefinition':
      case 'Policy': {
        const idsChanged = kind === 'ApiDefinition' && this.ctx.apiIds.update(obj, type === 'delete');
        if (!specChanged || listing) return;
        this.queue.add(`Config|${ns}`);
        // the keys and clients that refer to it are checked again behind live changes (a new API would
        // otherwise put every key of its namespace ahead of the next key created); a key's status reads
        // only whether its APIs exist, so an API edit that keeps the namespace's api_ids checks no key
        if (kind === 'Policy' || idsChanged)
          for (const k of this.informers.keys.list(ns)) {
            if (kind === 'ApiDefinition' ? hasAccessRights(k) : policiesOf(k).includes(name))
              this.queue.add(`AccessKey|${ns}|${k.metadata.name}`, 'bulk');
          }
        for (const c of this.informers.clients.list(ns)) this.queue.add(`OAuthClient|${ns}|${c.metadata.name}`, 'bulk');
        return;
      }
      case 'AccessKey':
        this.secretIndex.update('AccessKey', obj, type === 'delete');
        if (listing || (!lifecycleChanged && type === 'update')) return;
        if (type !== 'delete') this.queue.add(`AccessKey|${ns}|${name}`);
        // a Policy's status lists its keys: the namespace's config again, when the key applies a policy
        if (specChanged && (policiesOf(obj).length || (old && policiesOf(old).length))) {
          this.ctx.settled.bumpKeys(ns);
          this.queue.addAfter(`Config|${ns}`, 1000);
        }
        return;
      case 'OAuthClient':
        this.secretIndex.update('OAuthClient', obj, type === 'delete');
        if (type !== 'delete' && lifecycleChanged && !listing) this.queue.add(`OAuthClient|${ns}|${name}`);
        return;
      case 'Secret':
        if (listing) return;
        for (const user of this.secretIndex.users(ns, name)) this.queue.add(user);
        return;
      case 'ConfigMap':
        if (listing) return;
        if (name === CONFIG_MAP_NAME || shardIndexOf(name) !== undefined) this.queue.add(`Config|${ns}`);
        return;
    }
  }
}

function hasAccessRights(raw: KubeObject): boolean {
  const ar = (raw as { spec?: { access_rights?: unknown } }).spec?.access_rights;
  return !!ar && typeof ar === 'object' && Object.keys(ar).length > 0;
}
