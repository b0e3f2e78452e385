/**
 * Writes a namespace's config layout (config-layout.ts) as ConfigMaps: the inline config in gw-config, or
 * each shard gw-config-<n> then the index in gw-config, then the shards no longer in the layout are deleted.
 * A ConfigMap is written only when its data, annotations, labels or owner references differ from the
 * cached one, so an edit rewrites the one shard that changed (and the small index), and a resync writes
 * nothing; a hand edit is put back on its watch event. The index is written after its shards, so a
 * sidecar never sees an index naming a shard content not yet stored.
 */
import { z } from 'zod';
import { CONFIG_MAP_KEY, CONFIG_MAP_NAME, ConfigMapData } from '../contract/config-schema.js';
import { CONFIG_INDEX_KEY, CONFIG_SHARD_LABEL, sha256Of, shardIndexOf, shardName } from '../contract/config-shards.js';
import type { ShardIndex } from '../contract/config-shards.js';
import { MANAGED_BY, REFS, type OperatorContext } from './context.js';
import type { KubeObject } from '../lib/kube/informer.js';
import { codeOf, resourcePath } from '../lib/kube/api.js';
import { shardHash, shardText, type Layout, type LayoutItem, type OwnerRef } from './config-layout.js';

export const CONFIG_HASH_ANNOTATION = 'gw.io/config-hash';

/** ConfigMapData plus the metadata compared before a write. */
const ConfigMapWithMeta = z.looseObject({
  ...ConfigMapData.shape,
  metadata: z.looseObject({
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    ownerReferences: z
      .array(z.looseObject({ apiVersion: z.string(), kind: z.string(), name: z.string(), uid: z.string() }))
      .optional(),
  }),
});

const ownersText = (l: OwnerRef[]): string =>
  JSON.stringify(
    l
      .map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid }))
      .sort((a, b) => a.uid.localeCompare(b.uid)),
  );

interface Desired {
  name: string;
  data: Record<string, string>;
  hash: string;
  labels: Record<string, string>;
  owners: OwnerRef[];
}

/**
 * Per `namespace/shard`, the items of the ConfigMap last written or found right, its content SHA-256 and the
 * resourceVersion it had then: while a shard holds the same item objects (config-layout.ts keeps an unchanged
 * API's item) and its ConfigMap is still that version, nothing of it is stringified, hashed or compared again.
 */
const shardMemos = new Map<string, { items: LayoutItem[]; sha256: string; rv: string | undefined }>();

/** Shard texts built (tests: an edit among many shards builds one). */
export const shardStats = { built: 0 };

const sameItems = (a: LayoutItem[], b: LayoutItem[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Writes what the layout says; returns the number of ConfigMaps written or deleted. */
export async function writeLayout(ctx: OperatorContext, ns: string, layout: Layout): Promise<number> {
  const cms = ctx.informers.configMaps;
  const stale = new Set(
    cms
      .list(ns)
      .map((c) => c.metadata.name)
      .filter((n) => shardIndexOf(n) !== undefined),
  );
  let writes = 0;
  const [first] = layout.shards;
  if (layout.shards.length === 1 && first?.index === 1) {
    const text = shardText(layout.served.hash, first.items);
    const owners = first.items.flatMap((i) => (i.owner ? [i.owner] : []));
    const desired = {
      name: CONFIG_MAP_NAME,
      data: { [CONFIG_MAP_KEY]: text },
      hash: layout.served.hash,
      labels: {},
      owners,
    };
    if (await ensure(ctx, ns, desired)) writes++;
  } else {
    const entries: ShardIndex['shards'] = [];
    const shardOwners: OwnerRef[] = [];
    for (const s of layout.shards) {
      const name = shardName(s.index);
      stale.delete(name);
      const memoKey = `${ns}/${name}`;
      const memo = shardMemos.get(memoKey);
      const cachedRv = cms.get(ns, name)?.metadata.resourceVersion;
      if (memo && sameItems(memo.items, s.items) && memo.rv !== undefined && memo.rv === cachedRv) {
        // the same items as the ConfigMap this controller last wrote or checked, and that ConfigMap unchanged
        entries.push({ name, sha256: memo.sha256 });
        const uid = cms.get(ns, name)?.metadata.uid;
        if (uid) shardOwners.push({ apiVersion: 'v1', kind: 'ConfigMap', name, uid });
        continue;
      }
      shardStats.built++;
      const hash = shardHash(s.items);
      const text = shardText(hash, s.items);
      const desired = {
        name,
        data: { [CONFIG_MAP_KEY]: text },
        hash,
        labels: { [CONFIG_SHARD_LABEL]: String(s.index) },
        owners: s.items.flatMap((i) => (i.owner ? [i.owner] : [])),
      };
      if (await ensure(ctx, ns, desired)) writes++;
      const sha256 = sha256Of(text);
      shardMemos.set(memoKey, { items: s.items, sha256, rv: cms.get(ns, name)?.metadata.resourceVersion });
      entries.push({ name, sha256 });
      const uid = cms.get(ns, name)?.metadata.uid;
      if (uid) shardOwners.push({ apiVersion: 'v1', kind: 'ConfigMap', name, uid });
    }
    const index: ShardIndex = { hash: sha256Of(entries.map((e) => e.sha256).join('\n')).slice(0, 16), shards: entries };
    // the index belongs to its shards: garbage-collected with the last of them
    const desired = {
      name: CONFIG_MAP_NAME,
      data: { [CONFIG_INDEX_KEY]: JSON.stringify(index) },
      hash: index.hash,
      labels: {},
      owners: shardOwners,
    };
    if (await ensure(ctx, ns, desired)) writes++;
  }
  for (const name of stale) {
    shardMemos.delete(`${ns}/${name}`);
    try {
      await ctx.api.delete(resourcePath(REFS.ConfigMap, ns, name));
    } catch (e) {
      if (codeOf(e) !== 404) throw e;
    }
    ctx.metrics.writes.inc({ target: 'configmap_delete' });
    writes++;
  }
  return writes;
}

/** Creates or updates one ConfigMap unless the cached one already says the same. True when written. */
async function ensure(ctx: OperatorContext, ns: string, d: Desired): Promise<boolean> {
  const existing = ctx.informers.configMaps.get(ns, d.name);
  const cur = existing ? ConfigMapWithMeta.safeParse(existing) : undefined;
  const labels = { ...MANAGED_BY, ...d.labels };
  if (
    cur?.success &&
    JSON.stringify(cur.data.data ?? {}) === JSON.stringify(d.data) &&
    cur.data.metadata.annotations?.[CONFIG_HASH_ANNOTATION] === d.hash &&
    Object.entries(labels).every(([k, v]) => cur.data.metadata.labels?.[k] === v) &&
    ownersText(cur.data.metadata.ownerReferences ?? []) === ownersText(d.owners)
  )
    return false;
  const body = (resourceVersion?: string) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: d.name,
      namespace: ns,
      labels,
      annotations: { [CONFIG_HASH_ANNOTATION]: d.hash },
      ownerReferences: [...d.owners].sort((a, b) => a.uid.localeCompare(b.uid)),
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    data: d.data,
  });
  const path = resourcePath(REFS.ConfigMap, ns, d.name);
  let written: unknown;
  if (existing) written = await ctx.api.put(path, body(existing.metadata.resourceVersion));
  else {
    try {
      written = await ctx.api.post(resourcePath(REFS.ConfigMap, ns), body());
    } catch (e) {
      // there already, without the label the cache selects (written by hand): taken over
      if (codeOf(e) !== 409) throw e;
      const found = (await ctx.api.get(path)) as KubeObject;
      written = await ctx.api.put(path, body(found.metadata.resourceVersion));
    }
  }
  ctx.metrics.writes.inc({ target: 'configmap' });
  ctx.informers.configMaps.remember(written);
  const bytes = Object.values(d.data).reduce((s, v) => s + Buffer.byteLength(v), 0);
  ctx.logger.info(
    { namespace: ns, configMap: d.name, hash: d.hash, bytes },
    existing ? 'config map updated' : 'config map created',
  );
  return true;
}
