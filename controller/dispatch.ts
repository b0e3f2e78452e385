/**
 * Dispatch, both ways between the informers, the queue and the reconcilers (reconcilers.ts):
 *   an informer event → the indexes learn it (api_ids, Secret users, the namespace's key epoch) → the
 *     watches of its kind map it to work items → the queue;
 *   a work item from the queue → the reconciler of its kind, timed and counted by kind, as one span, then
 *     the work that reconciler queues after a success.
 * The caches' first list (every object an "add") only feeds the indexes: the full resync that follows the
 * sync queues everything as bulk work — queued here, each object would be live work, and a change made
 * during the start-up pass would wait for all of it.
 */
import type { ChangeType, KubeObject } from '../lib/kube/informer.js';
import type { Tracing } from '../lib/trace/otel.js';
import { StoreUnavailable, type OperatorContext } from './context.js';
import type { SecretIndex } from './secret-index.js';
import type { WorkQueue } from './work-queue.js';
import type { WorkItem } from './work-items.js';
import { changesPolicyKeys } from './reconcilers.js';
import type { Queued, Reconciler, Reconcilers, Watch, WatchContext, WatchedKind, WatchEvent } from './watches.js';

export interface DispatchOptions {
  reconcilers: Reconcilers;
  ctx: OperatorContext;
  queue: WorkQueue<WorkItem>;
  secretIndex: SecretIndex;
  /** False while the caches make their first list. */
  synced: () => boolean;
  tracing?: Tracing;
}

export class Dispatcher {
  private readonly watches = new Map<WatchedKind, Watch[]>();
  private readonly watchContext: WatchContext;

  constructor(private readonly o: DispatchOptions) {
    for (const r of Object.values(o.reconcilers) as Reconciler<WorkItem['kind']>[])
      for (const w of r.watches) this.watches.set(w.kind, [...(this.watches.get(w.kind) ?? []), w]);
    this.watchContext = { informers: o.ctx.informers, secretIndex: o.secretIndex };
  }

  /** One informer event of `kind`. */
  onEvent(kind: WatchedKind, type: ChangeType, obj: KubeObject, old?: KubeObject): void {
    const specChanged = type !== 'update' || !old || old.metadata.generation !== obj.metadata.generation;
    const e: WatchEvent = {
      kind,
      type,
      obj,
      old,
      namespace: obj.metadata.namespace ?? 'default',
      name: obj.metadata.name,
      specChanged,
      lifecycleChanged:
        specChanged ||
        old?.metadata.deletionTimestamp !== obj.metadata.deletionTimestamp ||
        JSON.stringify(old?.metadata.annotations ?? {}) !== JSON.stringify(obj.metadata.annotations ?? {}),
      apiIdsChanged: false,
    };
    const listing = !this.o.synced();
    this.learn(e, listing);
    if (listing) return;
    for (const w of this.watches.get(kind) ?? []) for (const q of w.map(e, this.watchContext)) this.enqueue(q);
  }

  /** Runs one work item (the queue's handler). */
  async run(item: WorkItem): Promise<void> {
    const { kind } = item;
    const { metrics } = this.o.ctx;
    const end = metrics.latency.startTimer({ kind });
    const span = this.o.tracing?.startChild(`reconcile ${kind}`, undefined, {
      'gw.kind': kind,
      'k8s.namespace.name': item.namespace,
      ...('name' in item ? { 'gw.resource.name': item.name } : {}),
    });
    try {
      const r = this.o.reconcilers[kind] as Reconciler<WorkItem['kind']>;
      await r.reconcile(this.o.ctx, item);
      for (const next of r.after?.(item) ?? []) this.o.queue.add(next);
      metrics.reconciles.inc({ kind, result: 'success' });
    } catch (e) {
      metrics.reconciles.inc({ kind, result: e instanceof StoreUnavailable ? 'store_unavailable' : 'error' });
      span?.setStatus({ code: 2 /* ERROR */, message: (e as Error)?.message ?? String(e) });
      throw e;
    } finally {
      end();
      span?.end();
    }
  }

  /** The indexes follow every event, the first list's included (bar the key epoch: no config is settled yet). */
  private learn(e: WatchEvent, listing: boolean): void {
    const deleted = e.type === 'delete';
    if (e.kind === 'ApiDefinition') e.apiIdsChanged = this.o.ctx.apiIds.update(e.obj, deleted);
    if (e.kind === 'AccessKey' || e.kind === 'OAuthClient') this.o.secretIndex.update(e.kind, e.obj, deleted);
    // a Policy's status lists its keys: a settled config of the namespace no longer holds (config-settled.ts)
    if (e.kind === 'AccessKey' && !listing && changesPolicyKeys(e)) this.o.ctx.settled.bumpKeys(e.namespace);
  }

  private enqueue(q: Queued): void {
    if (q.afterMs !== undefined) this.o.queue.addAfter(q.item, q.afterMs);
    else this.o.queue.add(q.item, q.priority);
  }
}
