/**
 * The reconcilers, each as a declaration (watches.ts): the work item it takes, the kinds it watches and
 * how each event of those kinds maps to work items. Status-only updates (our own writes included) map to
 * nothing: every watch below asks for a spec change, a lifecycle change, or a name it reads.
 */
import type { KubeObject } from '../lib/kube/informer.js';
import { CONFIG_MAP_NAME } from '../contract/config-schema.js';
import { shardIndexOf } from '../contract/config-shards.js';
import { policiesOf, reconcileConfig } from './reconcile-config.js';
import { reconcileKey } from './reconcile-key.js';
import { reconcileClient } from './reconcile-client.js';
import type { Queued, Reconcilers, Watch, WatchEvent } from './watches.js';
import { clientItem, configItem, keyItem } from './work-items.js';

const none: readonly Queued[] = [];

/** An AccessKey change a Policy's status sees (it lists its keys): the key applies, or applied, a policy. */
export function changesPolicyKeys(e: WatchEvent): boolean {
  return e.specChanged && (policiesOf(e.obj).length > 0 || (!!e.old && policiesOf(e.old).length > 0));
}

function hasAccessRights(raw: KubeObject): boolean {
  const ar = (raw as { spec?: { access_rights?: unknown } }).spec?.access_rights;
  return !!ar && typeof ar === 'object' && Object.keys(ar).length > 0;
}

/** A resource's own events: a new one, a new generation, a deletion begun, new annotations. */
const own = (kind: 'AccessKey' | 'OAuthClient'): Watch => ({
  kind,
  map: (e) =>
    e.type !== 'delete' && e.lifecycleChanged
      ? [{ item: kind === 'AccessKey' ? keyItem(e.namespace, e.name) : clientItem(e.namespace, e.name) }]
      : none,
});

/** A Secret's users (by secretRef) of this kind. */
const secretUsers = (kind: 'AccessKey' | 'OAuthClient'): Watch => ({
  kind: 'Secret',
  map: (e, w) =>
    w.secretIndex
      .users(e.namespace, e.name)
      .filter((u) => u.kind === kind)
      .map((item) => ({ item })),
});

/** The clients of the namespace, behind live changes: their API or policy may have come or gone. */
const namespaceClients = (kind: 'ApiDefinition' | 'Policy'): Watch => ({
  kind,
  map: (e, w) =>
    e.specChanged
      ? w.informers.clients
          .list(e.namespace)
          .map((c) => ({ item: clientItem(e.namespace, c.metadata.name), priority: 'bulk' as const }))
      : none,
});

const namespaceConfig = (kind: 'ApiDefinition' | 'Policy'): Watch => ({
  kind,
  map: (e) => (e.specChanged ? [{ item: configItem(e.namespace) }] : none),
});

export const reconcilers: Reconcilers = {
  /** ApiDefinitions + Policies of a namespace → its compiled config in ConfigMaps (reconcile-config.ts). */
  Config: {
    kind: 'Config',
    reconcile: (ctx, item) => reconcileConfig(ctx, item.namespace),
    // the statuses it computed, written by their own item: the next edit's ConfigMaps do not wait for them
    after: (item) => [{ kind: 'ConfigStatus', namespace: item.namespace }],
    watches: [
      namespaceConfig('ApiDefinition'),
      namespaceConfig('Policy'),
      // a Policy's status lists its keys: the namespace's config again, a second later (a burst is one run)
      {
        kind: 'AccessKey',
        map: (e) => (changesPolicyKeys(e) ? [{ item: configItem(e.namespace), afterMs: 1000 }] : none),
      },
      // a hand edit of gw-config or of a shard is put back
      {
        kind: 'ConfigMap',
        map: (e) =>
          e.name === CONFIG_MAP_NAME || shardIndexOf(e.name) !== undefined ? [{ item: configItem(e.namespace) }] : none,
      },
    ],
  },
  /** The statuses a Config run computed (config-status.ts); queued by that run, it watches nothing. */
  ConfigStatus: {
    kind: 'ConfigStatus',
    reconcile: (ctx, item) => ctx.statusPlans.write(ctx, item.namespace),
    watches: [],
  },
  /** AccessKey → session in Redis, generated Secret, quota reset, finalizer (reconcile-key.ts). */
  AccessKey: {
    kind: 'AccessKey',
    reconcile: (ctx, item) => reconcileKey(ctx, item.namespace, item.name),
    watches: [
      own('AccessKey'),
      secretUsers('AccessKey'),
      // behind live changes (a new API would otherwise put every key of its namespace ahead of the next key
      // created); a key's status reads only whether its APIs exist, so an API edit that keeps the
      // namespace's api_ids checks no key
      {
        kind: 'ApiDefinition',
        map: (e, w) =>
          e.specChanged && e.apiIdsChanged
            ? w.informers.keys
                .list(e.namespace)
                .filter(hasAccessRights)
                .map((k) => ({ item: keyItem(e.namespace, k.metadata.name), priority: 'bulk' as const }))
            : none,
      },
      {
        kind: 'Policy',
        map: (e, w) =>
          e.specChanged
            ? w.informers.keys
                .list(e.namespace)
                .filter((k) => policiesOf(k).includes(e.name))
                .map((k) => ({ item: keyItem(e.namespace, k.metadata.name), priority: 'bulk' as const }))
            : none,
      },
    ],
  },
  /** OAuthClient → client record in Redis, finalizer (reconcile-client.ts). */
  OAuthClient: {
    kind: 'OAuthClient',
    reconcile: (ctx, item) => reconcileClient(ctx, item.namespace, item.name),
    watches: [
      own('OAuthClient'),
      secretUsers('OAuthClient'),
      namespaceClients('ApiDefinition'),
      namespaceClients('Policy'),
    ],
  },
};
