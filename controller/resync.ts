/**
 * The full resync: every namespace's config, every key, every client checked again, behind every live
 * change (a resync of tens of thousands of keys never delays an edit). What is as the last reconcile left
 * it costs a comparison, not a reconcile: a namespace whose ApiDefinitions, Policies, ConfigMaps and keys
 * are the versions its last complete config reconcile left is not queued (config-settled.ts); an AccessKey
 * whose memo holds has its session compared with the store's in batches (key-audit.ts) and is queued only
 * when it differs. Runs when a replica starts leading, every resync period, when Redis (re)connects and
 * after a store restore (store-marker.ts).
 */
import type { OperatorContext } from './context.js';
import type { KeyAudit } from './key-audit.js';
import type { WorkQueue } from './work-queue.js';
import { clientItem, configItem, type WorkItem } from './work-items.js';

export interface ResyncOptions {
  ctx: OperatorContext;
  queue: WorkQueue<WorkItem>;
  audit: KeyAudit;
  /** False while the caches make their first list (nothing to compare yet). */
  synced: () => boolean;
}

export function fullResync(o: ResyncOptions, cause: string): void {
  if (!o.synced()) return;
  const { informers, metrics, settled } = o.ctx;
  metrics.resyncs.inc({ cause });
  const namespaces = new Set<string>();
  for (const inf of [informers.apis, informers.policies, informers.configMaps]) {
    for (const obj of inf.list()) namespaces.add(obj.metadata.namespace ?? 'default');
  }
  for (const ns of namespaces) {
    if (settled.holds(informers, ns)) metrics.unchanged.inc({ kind: 'Config' });
    else o.queue.add(configItem(ns), 'bulk');
  }
  void o.audit.run();
  for (const c of informers.clients.list())
    o.queue.add(clientItem(c.metadata.namespace ?? 'default', c.metadata.name), 'bulk');
}
