/**
 * ApiDefinitions + Policies of one namespace → the compiled config in the ConfigMaps the sidecars of the
 * namespace watch (inline in `gw-config`, or sharded over `gw-config-<n>` with an index in `gw-config`:
 * config-layout.ts, config-maps.ts), plus the status of every ApiDefinition and Policy there. A resource
 * too large for any shard is refused alone (Ready=False ConfigTooLarge, a log line, gw_controller_config_refused);
 * the others are served and their edits keep applying.
 */
import { z } from 'zod';
import { ApiDefinitionResource, API_VERSION, PolicyResource } from '../crds/kinds.js';
import { compileConfig, servingApis } from '../compiler/compile-config.js';
import { IncrementalCompiler } from '../compiler/incremental-config.js';
import { missingPolicyApis } from '../compiler/key-references.js';
import { CONFIG_MAP_NAME } from '../contract/config-schema.js';
import { shardName } from '../contract/config-shards.js';
import type { CompiledConfig } from '../contract/config.js';
import { firstIssue, type OperatorContext } from './context.js';
import type { KubeObject } from '../lib/kube/informer.js';
import { notReady, ok, type Outcome } from './status.js';
import { layoutConfig, type Layout, type OwnerRef } from './config-layout.js';
import { writeLayout } from './config-maps.js';

/**
 * What one ConfigMap may carry of items and owner references (a ConfigMap holds at most 1 MiB of data, an
 * object at most 1.5 MiB in etcd): leaves room for the metadata.
 */
export const SHARD_BUDGET_BYTES = 900_000;
/** How many key names a Policy's status lists (keyCount has the total). */
export const POLICY_STATUS_KEYS = 50;

/** Policy names an AccessKey applies (raw cached object: status needs it even for keys not yet valid). */
export function policiesOf(raw: unknown): string[] {
  const spec = (raw as { spec?: { apply_policies?: unknown; apply_policy_id?: unknown } } | null)?.spec;
  if (!spec || typeof spec !== 'object') return [];
  const list =
    Array.isArray(spec.apply_policies) && spec.apply_policies.length
      ? spec.apply_policies
      : typeof spec.apply_policy_id === 'string' && spec.apply_policy_id
        ? [spec.apply_policy_id]
        : [];
  return [...new Set(list.filter((x): x is string => typeof x === 'string'))];
}

/** The owner reference of a resource the config was compiled from. */
function ownerRef(kind: 'ApiDefinition' | 'Policy', raw: KubeObject | undefined): OwnerRef | undefined {
  const uid = raw?.metadata.uid;
  return uid ? { apiVersion: API_VERSION, kind, name: raw.metadata.name, uid } : undefined;
}

/** Resources refused for size: a log line when one is newly refused, the gauge per namespace. */
function reportRefusals(ctx: OperatorContext, ns: string, layout: Layout): void {
  const now = new Set(layout.refused.map((r) => `${r.item.kind}/${r.item.name}`));
  const before = ctx.refused.get(ns);
  for (const r of layout.refused) {
    if (before?.has(`${r.item.kind}/${r.item.name}`)) continue;
    ctx.logger.warn(
      { namespace: ns, kind: r.item.kind, name: r.item.name, bytes: r.item.bytes },
      `config refused for this resource only: ${r.message}`,
    );
  }
  if (now.size) ctx.refused.set(ns, now);
  else ctx.refused.delete(ns);
  ctx.metrics.configRefused.set({ namespace: ns }, now.size);
  ctx.metrics.configShards.set({ namespace: ns }, layout.shards.length);
}

/**
 * Each resource parsed once per spec: the informer replaces an object on every change, including our own
 * status writes (which leave metadata.generation as it was), so the parse — and, through compileConfig's
 * cache keyed by the parsed object, the compiled API and its text — is kept per namespace/name for as long
 * as its uid and generation stay the same. What is compiled reads only the spec, the name, the namespace
 * and creationTimestamp (fixed for a uid), never the status, labels or annotations. An object without a
 * uid or generation (a test double) is parsed once per object instead.
 */
interface ParsedEntry {
  uid: string;
  generation: number;
  result: z.ZodSafeParseResult<unknown>;
}
const parsedBySpec = new Map<string, Map<string, ParsedEntry>>();
const parsedOnce = new WeakMap<KubeObject, z.ZodSafeParseResult<unknown>>();
/** Per namespace, its compiled config kept up to date by each reconcile (one reconcile of a namespace at a time). */
const compilers = new Map<string, IncrementalCompiler>();

/**
 * The cached resources of one kind that parse: the parsed ones in cache order, the raw object of each
 * by name, and an InvalidSpec outcome for each that does not (into `invalid`, when given). `fresh` is
 * called once per object parsed anew (a cache miss).
 */
function parseCached<T extends { metadata: { name: string } }>(
  kind: 'ApiDefinition' | 'Policy',
  ns: string,
  raws: KubeObject[],
  schema: z.ZodType<T>,
  invalid?: Map<KubeObject, Outcome>,
  fresh: () => void = () => {},
): { parsed: T[]; byName: Map<string, KubeObject> } {
  const parsed: T[] = [];
  const byName = new Map<string, KubeObject>();
  const cacheKey = `${kind}|${ns}`;
  const before = parsedBySpec.get(cacheKey);
  const now = new Map<string, ParsedEntry>();
  for (const raw of raws) {
    const { uid, generation, name } = raw.metadata as { uid?: unknown; generation?: unknown; name: string };
    let r: z.ZodSafeParseResult<T> | undefined;
    if (typeof uid === 'string' && typeof generation === 'number') {
      const e = before?.get(name);
      if (e && e.uid === uid && e.generation === generation) r = e.result as z.ZodSafeParseResult<T>;
      else {
        r = schema.safeParse(raw);
        fresh();
      }
      now.set(name, { uid, generation, result: r });
    } else {
      r = parsedOnce.get(raw) as z.ZodSafeParseResult<T> | undefined;
      if (!r) {
        parsedOnce.set(raw, (r = schema.safeParse(raw)));
        fresh();
      }
    }
    if (!r.success) invalid?.set(raw, notReady('InvalidSpec', firstIssue(r.error)));
    else {
      parsed.push(r.data);
      byName.set(r.data.metadata.name, raw);
    }
  }
  // only the namespace's current resources are kept: deleted ones age out with the next reconcile
  if (now.size) parsedBySpec.set(cacheKey, now);
  else parsedBySpec.delete(cacheKey);
  return { parsed, byName };
}

/** The compiled config of a namespace from the cache, without writing anything. */
export function compileNamespace(ctx: OperatorContext, ns: string): CompiledConfig {
  const apis = parseCached('ApiDefinition', ns, ctx.informers.apis.list(ns), ApiDefinitionResource).parsed;
  const policies = parseCached('Policy', ns, ctx.informers.policies.list(ns), PolicyResource).parsed;
  return compileConfig(apis, policies, servingApis(ctx.configs.get(ns))).config;
}

export async function reconcileConfig(ctx: OperatorContext, ns: string): Promise<void> {
  const { informers: inf } = ctx;
  // settled again only once this reconcile's statuses are all written (config-settled.ts)
  ctx.settled.forget(ns);
  const keyEpoch = ctx.settled.keyEpoch(ns);
  const outcomes = new Map<KubeObject, Outcome>();
  // the phases' durations, in the log line of a reconcile that wrote a ConfigMap
  const t0 = performance.now();
  let parsedAnew = 0;
  // a kind's cached resources parsed, each one parsed anew (a cache miss) counted for the log line and the metric
  const parseKind = <T extends { metadata: { name: string } }>(
    kind: 'ApiDefinition' | 'Policy',
    raws: KubeObject[],
    schema: z.ZodType<T>,
  ) =>
    parseCached(kind, ns, raws, schema, outcomes, () => {
      parsedAnew++;
      ctx.metrics.configParsed.inc({ kind });
    });
  const { parsed: apis, byName: apiRaw } = parseKind('ApiDefinition', inf.apis.list(ns), ApiDefinitionResource);
  const { parsed: policies, byName: policyRaw } = parseKind('Policy', inf.policies.list(ns), PolicyResource);
  const tParsed = performance.now();
  // the APIs this controller last compiled keep their place against a newcomer (a fresh leader has none
  // yet: the older creationTimestamp wins, which is the one serving unless it was invalid until now); kept
  // up to date edit by edit: the parsed objects of unchanged resources are the same objects, so an edit
  // decides again only the APIs that share a listen path or an api_id with it (compiler/incremental-config.ts)
  let compiler = compilers.get(ns);
  if (!compiler) compilers.set(ns, (compiler = new IncrementalCompiler()));
  const { config, problems } = await compiler.update(apis, policies);
  if (!apis.length && !policies.length) compilers.delete(ns);
  ctx.configs.set(ns, config);
  for (const p of problems) {
    const raw = (p.kind === 'ApiDefinition' ? apiRaw : policyRaw).get(p.name);
    if (raw) outcomes.set(raw, notReady('InvalidSpec', p.message));
  }

  const tCompiled = performance.now();
  // The ConfigMaps: inline, or shards + index; a resource too large for any shard is refused alone.
  const byName = (kind: 'ApiDefinition' | 'Policy', name: string) =>
    (kind === 'ApiDefinition' ? apiRaw : policyRaw).get(name);
  const layout = layoutConfig(
    config,
    {
      owner: (kind, name) => ownerRef(kind, byName(kind, name)),
      created: (kind, name) => String(byName(kind, name)?.metadata.creationTimestamp ?? ''),
    },
    ctx.shardBudget ?? SHARD_BUDGET_BYTES,
  );
  ctx.configs.set(ns, layout.served);
  for (const r of layout.refused) {
    const raw = byName(r.item.kind, r.item.name);
    if (raw) outcomes.set(raw, notReady('ConfigTooLarge', `${r.item.kind} ${ns}/${r.item.name}: ${r.message}`));
  }
  reportRefusals(ctx, ns, layout);
  const tLaidOut = performance.now();
  const written =
    apis.length + policies.length > 0 || inf.configMaps.list(ns).length ? await writeLayout(ctx, ns, layout) : 0;
  const tWritten = performance.now();
  const shardOf = new Map<string, number>();
  for (const s of layout.shards) for (const i of s.items) if (i.api) shardOf.set(i.name, s.index);

  // Statuses.
  const apiIds = new Set(layout.served.apis.map((a) => a.api_id));
  const keysByPolicy = new Map<string, string[]>();
  for (const k of policies.length ? inf.keys.list(ns) : []) {
    for (const p of policiesOf(k)) {
      const l = keysByPolicy.get(p) ?? [];
      l.push(k.metadata.name);
      keysByPolicy.set(p, l);
    }
  }
  const compiled = new Map(layout.served.apis.map((c) => [c.name, c]));
  for (const a of apis) {
    const raw = apiRaw.get(a.metadata.name)!;
    if (outcomes.has(raw)) continue;
    // what `kubectl get apidefinitions` prints, the same for the classic and the OAS form
    const c = compiled.get(a.metadata.name);
    const shown = c && {
      listenPath: c.listenPath,
      ...(c.apiLimit ? { rate: c.apiLimit.rate, per: c.apiLimit.per } : {}),
    };
    const shard = shardOf.get(a.metadata.name) ?? 1;
    outcomes.set(raw, ok(`compiled into ConfigMap ${shard === 1 ? CONFIG_MAP_NAME : shardName(shard)}`, shown));
  }
  for (const p of policies) {
    const raw = policyRaw.get(p.metadata.name)!;
    const referenced = Object.keys(p.spec.access_rights ?? {});
    const present = referenced.filter((id) => apiIds.has(id)).sort();
    const missing = missingPolicyApis(p.spec.access_rights, ns, (id) => apiIds.has(id));
    const keys = (keysByPolicy.get(p.metadata.name) ?? []).sort();
    const extra = { apis: present, keys: keys.slice(0, POLICY_STATUS_KEYS), keyCount: keys.length };
    if (outcomes.has(raw)) continue;
    if (missing) outcomes.set(raw, notReady(missing[0], missing[1], extra));
    else outcomes.set(raw, ok(`applied to ${keys.length} key(s)`, extra));
  }
  // written by the ConfigStatus|ns key (config-status.ts): the next edit's ConfigMaps do not wait for them
  if (written) {
    const ms = (a: number, b: number): number => Math.round(b - a);
    ctx.logger.info(
      {
        namespace: ns,
        apis: apis.length,
        parsedAnew,
        configMapsWritten: written,
        ms: {
          parse: ms(t0, tParsed),
          compile: ms(tParsed, tCompiled),
          layout: ms(tCompiled, tLaidOut),
          write: ms(tLaidOut, tWritten),
          statuses: ms(tWritten, performance.now()),
        },
      },
      'config reconciled',
    );
  }
  const configMaps = ctx.settled.configMapVersions(inf, ns);
  ctx.statusPlans.set(ns, outcomes, (objects) => ctx.settled.set(ns, { objects, configMaps, keyEpoch }));
}
