/**
 * The compiled config of a namespace split over several ConfigMaps (one ConfigMap holds at most 1 MiB).
 * Layout (docs/operator.md, "ConfigMaps"):
 *   - a config that fits stays inline: ConfigMap `gw-config`, key `config.json` (the single-ConfigMap form);
 *   - otherwise `gw-config` holds the index (key `shards.json`: the config hash and, per shard, its name and
 *     the SHA-256 of its text) and each shard `gw-config-<n>` holds a part (key `config.json`, the same
 *     shape as an inline config: `{hash, apis, policies}`).
 * Each API (by api_id) and each Policy (by name) goes to a shard chosen by the bits of a stable hash of
 * that id: shards are the leaves of a binary tree split where the content is over the shard budget, and
 * `<n>` is the leaf's heap index (root 1, children 2n and 2n+1), so one edit changes the one shard holding
 * the resource, and a growing namespace splits one shard at a time. A reader applies an index only once
 * it holds every shard it lists at the listed SHA-256: a change spanning shards is seen at once or not at all.
 */
import { z } from 'zod';
import type { CompiledApi, CompiledConfig, CompiledPolicy } from './config.js';
import { CONFIG_MAP_NAME } from './config-schema.js';
const { createHash } = process.getBuiltinModule('node:crypto');

/** The key of the index in ConfigMap gw-config (instead of config.json). */
export const CONFIG_INDEX_KEY = 'shards.json';
/** Label of every shard ConfigMap (value: the heap index). */
export const CONFIG_SHARD_LABEL = 'gw.io/config-shard';
/** Depth of the shard tree: at most 2^8 shards, named gw-config-2 … gw-config-511 (the chart's RBAC names them). */
export const SHARD_MAX_DEPTH = 8;
export const SHARD_MAX_INDEX = 2 ** (SHARD_MAX_DEPTH + 1) - 1;

export const shardName = (heapIndex: number): string => `${CONFIG_MAP_NAME}-${heapIndex}`;
const SHARD_NAME = /^gw-config-([1-9][0-9]{0,2})$/;

/** The heap index of a shard ConfigMap's name, or undefined when the name is not one. */
export function shardIndexOf(name: string): number | undefined {
  const m = SHARD_NAME.exec(name);
  const n = m ? Number(m[1]) : NaN;
  return n >= 2 && n <= SHARD_MAX_INDEX ? n : undefined;
}

export const ShardIndexSchema = z
  .object({
    hash: z.string(),
    shards: z
      .array(
        z.object({
          name: z
            .string()
            .refine((n) => shardIndexOf(n) !== undefined, `must be gw-config-2 … gw-config-${SHARD_MAX_INDEX}`),
          sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be SHA-256 hex'),
        }),
      )
      .min(1)
      .refine((l) => new Set(l.map((s) => s.name)).size === l.length, 'a shard is listed twice'),
  })
  .strict();
export type ShardIndex = z.infer<typeof ShardIndexSchema>;

export const sha256Of = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * The routing order of the compiled config: longest listen path first (docs/contract.md#request-path), then by path in
 * code-unit order (the same on every machine; localeCompare would load ICU's collation data).
 */
export const byListenPath = (a: CompiledApi, b: CompiledApi): number =>
  b.listenPath.length - a.listenPath.length || (a.listenPath < b.listenPath ? -1 : a.listenPath > b.listenPath ? 1 : 0);

/**
 * The parts of a sharded config, put back together in routing order with the index's hash. A listen
 * path, an api_id (per namespace) or a policy found in two shards is refused, as within one config.
 */
export function assembleShards(
  hash: string,
  parts: CompiledConfig[],
): { ok: true; config: CompiledConfig } | { ok: false; message: string } {
  const apis: CompiledApi[] = [];
  const policies: Record<string, CompiledPolicy> = {};
  const paths = new Set<string>();
  const ids = new Set<string>();
  for (const p of parts) {
    for (const a of p.apis) {
      const id = `${a.namespace}/${a.api_id}`;
      if (paths.has(a.listenPath)) return { ok: false, message: `listen path ${a.listenPath} is in two shards` };
      if (ids.has(id)) return { ok: false, message: `api_id ${id} is in two shards` };
      paths.add(a.listenPath);
      ids.add(id);
      apis.push(a);
    }
    for (const [k, v] of Object.entries(p.policies)) {
      if (k in policies) return { ok: false, message: `policy ${k} is in two shards` };
      policies[k] = v;
    }
  }
  apis.sort(byListenPath);
  const sorted: Record<string, CompiledPolicy> = {};
  for (const k of Object.keys(policies).sort()) sorted[k] = policies[k]!;
  return { ok: true, config: { hash, apis, policies: sorted } };
}
