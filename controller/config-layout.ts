/**
 * Where each part of a namespace's compiled config goes (contract/config-shards.ts): the whole config inline
 * in gw-config when it fits the shard budget, else the leaves of a binary tree over a stable hash of each
 * API's api_id and each Policy's name, a node split while its content is over the budget. The layout
 * depends on the content only, so a restarted controller finds the same shards, and an edit changes the
 * one shard of the edited resource (or splits/merges that one node when it crosses the budget).
 * A resource alone over the budget, or one that does not fit the deepest shard of its hash, is refused
 * (the newest first); the rest is laid out without it. Item texts are cached per compiled object, so a
 * reconcile of a large namespace stringifies only what changed.
 */
import type { CompiledApi, CompiledConfig, CompiledPolicy } from '../contract/config.js';
import { SHARD_MAX_DEPTH, sha256Of } from '../contract/config-shards.js';

export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export interface LayoutItem {
  kind: 'ApiDefinition' | 'Policy';
  /** metadata.name of the resource. */
  name: string;
  /** Its text in the config: an API's JSON, or a policy's `"ns/name":{…}` entry. */
  text: string;
  owner?: OwnerRef;
  /** Bytes it adds to a shard: its text, its owner reference, separators. */
  bytes: number;
  /** creationTimestamp (the newest is refused first when a deepest shard overflows). */
  created: string;
  /** The first 32 bits of the SHA-256 of its stable id. */
  bits: number;
  api?: CompiledApi;
  policy?: [string, CompiledPolicy];
}

export interface Shard {
  /** Heap index in the tree (1: the root, i.e. the inline config). */
  index: number;
  items: LayoutItem[];
}

export interface Refusal {
  item: LayoutItem;
  message: string;
}

export interface Layout {
  /** One shard with index 1 (inline) or the leaves, by index. */
  shards: Shard[];
  refused: Refusal[];
  /** The config served: the compiled config without the refused resources. */
  served: CompiledConfig;
}

/** What a shard's ConfigMap costs beyond its items: the hash, the JSON frame, the labels and metadata. */
const SHARD_OVERHEAD = 2048;

const apiTexts = new WeakMap<CompiledApi, string>();
const policyTexts = new WeakMap<CompiledPolicy, string>();
const idBits = new Map<string, number>();

function bitsOf(id: string): number {
  let b = idBits.get(id);
  if (b === undefined) {
    if (idBits.size > 1_000_000) idBits.clear(); // bounded: ids of deleted resources age out
    idBits.set(id, (b = Number.parseInt(sha256Of(id).slice(0, 8), 16)));
  }
  return b;
}

function apiText(a: CompiledApi): string {
  let t = apiTexts.get(a);
  if (t === undefined) apiTexts.set(a, (t = JSON.stringify(a)));
  return t;
}

function policyText(key: string, p: CompiledPolicy): string {
  let t = policyTexts.get(p);
  if (t === undefined) policyTexts.set(p, (t = `${JSON.stringify(key)}:${JSON.stringify(p)}`));
  return t;
}

export interface LayoutSources {
  owner(kind: 'ApiDefinition' | 'Policy', name: string): OwnerRef | undefined;
  created(kind: 'ApiDefinition' | 'Policy', name: string): string;
}

/**
 * The item of each compiled API, kept while its owner (uid) and creationTimestamp stay: a reconcile after one
 * edit measures and stringifies one item, and the shards of the others hold the same item objects
 * (config-maps.ts recognises an unchanged shard by them).
 */
const apiItems = new WeakMap<CompiledApi, LayoutItem>();

export function layoutConfig(config: CompiledConfig, src: LayoutSources, budget: number): Layout {
  const items: LayoutItem[] = [];
  const item = (kind: LayoutItem['kind'], name: string, id: string, text: string, extra: Partial<LayoutItem>) => {
    const owner = src.owner(kind, name);
    const bytes = Buffer.byteLength(text) + 1 + (owner ? Buffer.byteLength(JSON.stringify(owner)) + 1 : 0);
    const made: LayoutItem = {
      kind,
      name,
      text,
      owner,
      bytes,
      created: src.created(kind, name),
      bits: bitsOf(id),
      ...extra,
    };
    items.push(made);
    return made;
  };
  for (const a of config.apis) {
    const kept = apiItems.get(a);
    if (
      kept &&
      kept.owner?.uid === src.owner('ApiDefinition', a.name)?.uid &&
      kept.created === src.created('ApiDefinition', a.name)
    )
      items.push(kept);
    else apiItems.set(a, item('ApiDefinition', a.name, `a:${a.api_id}`, apiText(a), { api: a }));
  }
  for (const [k, p] of Object.entries(config.policies))
    item('Policy', p.name, `p:${p.name}`, policyText(k, p), { policy: [k, p] });

  const refused: Refusal[] = [];
  const room = budget - SHARD_OVERHEAD;
  const fitting = items.filter((i) => {
    if (i.bytes <= room) return true;
    refused.push({
      item: i,
      message: `its compiled form is ${i.bytes} bytes, over the ConfigMap shard budget of ${room} bytes; it is not served`,
    });
    return false;
  });
  const shards: Shard[] = [];
  const place = (index: number, depth: number, list: LayoutItem[]): void => {
    const size = list.reduce((s, i) => s + i.bytes, 0);
    if (size <= room) {
      if (list.length || index === 1) shards.push({ index, items: list });
      return;
    }
    if (depth === SHARD_MAX_DEPTH) {
      // the deepest shard of these hashes is full: the newest resources wait (a documented limit)
      const newestFirst = [...list].sort((a, b) => b.created.localeCompare(a.created) || b.name.localeCompare(a.name));
      let over = size - room;
      const out = new Set<LayoutItem>();
      for (const i of newestFirst) {
        if (over <= 0) break;
        out.add(i);
        over -= i.bytes;
        refused.push({
          item: i,
          message: `shard ${index} (the deepest for its hash) is full at ${room} bytes; it is not served`,
        });
      }
      shards.push({ index, items: list.filter((i) => !out.has(i)) });
      return;
    }
    const bit = (i: LayoutItem): number => (i.bits >>> (31 - depth)) & 1;
    place(
      index * 2,
      depth + 1,
      list.filter((i) => bit(i) === 0),
    );
    place(
      index * 2 + 1,
      depth + 1,
      list.filter((i) => bit(i) === 1),
    );
  };
  place(1, 0, fitting);
  shards.sort((a, b) => a.index - b.index);

  let served = config;
  if (refused.length) {
    const out = new Set(refused.map((r) => r.item));
    const apis = items.filter((i) => i.api && !out.has(i)).map((i) => i.api!);
    const policies = Object.fromEntries(items.filter((i) => i.policy && !out.has(i)).map((i) => i.policy!));
    const hash = sha256Of(`${config.hash}\n${[...out].map((i) => `${i.kind}/${i.name}`).join('\n')}`).slice(0, 16);
    served = { hash, apis, policies };
  }
  return { shards, refused, served };
}

/** A shard's (or the inline config's) text: the JSON of `{hash, apis, policies}` from the cached item texts. */
export function shardText(hash: string, items: LayoutItem[]): string {
  const apis: string[] = [];
  const policies: string[] = [];
  for (const i of items) (i.api ? apis : policies).push(i.text);
  return `{"hash":${JSON.stringify(hash)},"apis":[${apis.join(',')}],"policies":{${policies.join(',')}}}`;
}

/** The content hash of a shard's items. */
export function shardHash(items: LayoutItem[]): string {
  const h = sha256Of(items.map((i) => i.text).join('\n'));
  return h.slice(0, 16);
}
