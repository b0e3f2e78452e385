/**
 * The controller's work items: what the queue holds and a reconciler takes. A namespace's compiled config
 * (`Config`), the statuses its last Config run computed (`ConfigStatus`), one AccessKey, one OAuthClient.
 * The queue dedups and serialises by `itemKey` (`Config|<ns>`, `AccessKey|<ns>|<name>`, …), the name a
 * retry's log line gives; the reconcilers receive the item itself.
 */

export type WorkItem =
  | { kind: 'Config'; namespace: string }
  | { kind: 'ConfigStatus'; namespace: string }
  | { kind: 'AccessKey'; namespace: string; name: string }
  | { kind: 'OAuthClient'; namespace: string; name: string };

export type WorkKind = WorkItem['kind'];

/** The item of one kind. */
export type ItemOf<K extends WorkKind> = Extract<WorkItem, { kind: K }>;

export const configItem = (namespace: string): ItemOf<'Config'> => ({ kind: 'Config', namespace });
export const keyItem = (namespace: string, name: string): ItemOf<'AccessKey'> => ({
  kind: 'AccessKey',
  namespace,
  name,
});
export const clientItem = (namespace: string, name: string): ItemOf<'OAuthClient'> => ({
  kind: 'OAuthClient',
  namespace,
  name,
});

/** The queue key of an item: one per resource (AccessKey, OAuthClient) or per namespace (the config). */
export function itemKey(item: WorkItem): string {
  return 'name' in item ? `${item.kind}|${item.namespace}|${item.name}` : `${item.kind}|${item.namespace}`;
}

/**
 * The item that reconciles a resource of `kind`: an ApiDefinition or a Policy is its namespace's config;
 * undefined for a kind no reconciler owns.
 */
export function itemOfResource(kind: string, namespace: string, name: string): WorkItem | undefined {
  if (kind === 'ApiDefinition' || kind === 'Policy') return configItem(namespace);
  if (kind === 'AccessKey') return keyItem(namespace, name);
  if (kind === 'OAuthClient') return clientItem(namespace, name);
  return undefined;
}
