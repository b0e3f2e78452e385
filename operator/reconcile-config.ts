/**
 * ApiDefinitions + Policies of one namespace → the compiled config in ConfigMap `gw-config` of that
 * namespace (key config.json; the sidecars of the namespace watch it), plus the status of every
 * ApiDefinition and Policy there. The ConfigMap is written only when its content differs (hash in the
 * annotation gw.io/config-hash, content compared too, so a hand edit is put back); owner references
 * name every ApiDefinition and Policy it was compiled from. A config over the ConfigMap limit is not
 * written: every ApiDefinition of the namespace says ConfigTooLarge and the previous config stays.
 */
import { z } from 'zod';
import { ApiDefinitionResource, API_VERSION, PolicyResource } from '../crds/kinds.js';
import { compileConfig, servingApis } from '../compiler/compile-config.js';
import { CONFIG_MAP_KEY, CONFIG_MAP_NAME, ConfigMapData } from '../contract/config-schema.js';
import type { CompiledConfig } from '../contract/config.js';
import { firstIssue, MANAGED_BY, REFS, report, type OperatorContext } from './context.js';
import type { KubeObject } from '../lib/kube/informer.js';
import { resourcePath } from '../lib/kube/api.js';
import { notReady, ok, type Outcome } from './status.js';

export const CONFIG_HASH_ANNOTATION = 'gw.io/config-hash';
/** ConfigMaps are limited to 1 MiB in total; leave room for metadata. */
export const CONFIG_LIMIT_BYTES = 1_000_000;
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

/** ConfigMapData plus the metadata compared before a write. */
const ConfigMapWithMeta = z.looseObject({
  ...ConfigMapData.shape,
  metadata: z.looseObject({
    resourceVersion: z.string().optional(),
    annotations: z.record(z.string(), z.string()).optional(),
  }),
});

/**
 * The cached resources of one kind that parse: the parsed ones in cache order, the raw object of each
 * by name, and an InvalidSpec outcome for each that does not (into `invalid`, when given).
 */
function parseCached<T extends { metadata: { name: string } }>(
  raws: KubeObject[],
  schema: z.ZodType<T>,
  invalid?: Map<KubeObject, Outcome>,
): { parsed: T[]; byName: Map<string, KubeObject> } {
  const parsed: T[] = [];
  const byName = new Map<string, KubeObject>();
  for (const raw of raws) {
    const r = schema.safeParse(raw);
    if (!r.success) invalid?.set(raw, notReady('InvalidSpec', firstIssue(r.error)));
    else {
      parsed.push(r.data);
      byName.set(r.data.metadata.name, raw);
    }
  }
  return { parsed, byName };
}

/** The compiled config of a namespace from the cache, without writing anything. */
export function compileNamespace(ctx: OperatorContext, ns: string): CompiledConfig {
  const apis = parseCached(ctx.informers.apis.list(ns), ApiDefinitionResource).parsed;
  const policies = parseCached(ctx.informers.policies.list(ns), PolicyResource).parsed;
  return compileConfig(apis, policies, servingApis(ctx.configs.get(ns))).config;
}

export async function reconcileConfig(ctx: OperatorContext, ns: string): Promise<void> {
  const { informers: inf } = ctx;
  const outcomes = new Map<KubeObject, Outcome>();
  const { parsed: apis, byName: apiRaw } = parseCached(inf.apis.list(ns), ApiDefinitionResource, outcomes);
  const { parsed: policies, byName: policyRaw } = parseCached(inf.policies.list(ns), PolicyResource, outcomes);
  // the APIs this controller last compiled keep their place against a newcomer (a fresh leader has none
  // yet: the older creationTimestamp wins, which is the one serving unless it was invalid until now)
  const { config, problems } = compileConfig(apis, policies, servingApis(ctx.configs.get(ns)));
  ctx.configs.set(ns, config);
  for (const p of problems) {
    const raw = (p.kind === 'ApiDefinition' ? apiRaw : policyRaw).get(p.name);
    if (raw) outcomes.set(raw, notReady('InvalidSpec', p.message));
  }

  // The ConfigMap.
  const text = JSON.stringify(config);
  const size = Buffer.byteLength(text);
  let tooLarge: string | undefined;
  const existing = inf.configMaps.get(ns, CONFIG_MAP_NAME);
  if (size > CONFIG_LIMIT_BYTES) {
    tooLarge = `the compiled config of namespace ${ns} is ${size} bytes, over the ConfigMap limit of ${CONFIG_LIMIT_BYTES}; the previous config stays in force`;
  } else if (apis.length + policies.length > 0 || existing) {
    await writeConfigMap(ctx, ns, text, config.hash, [...apiRaw.values(), ...policyRaw.values()], existing);
  }

  // Statuses.
  const apiIds = new Set(config.apis.map((a) => a.api_id));
  const keysByPolicy = new Map<string, string[]>();
  for (const k of policies.length ? inf.keys.list(ns) : []) {
    for (const p of policiesOf(k)) {
      const l = keysByPolicy.get(p) ?? [];
      l.push(k.metadata.name);
      keysByPolicy.set(p, l);
    }
  }
  const compiled = new Map(config.apis.map((c) => [c.name, c]));
  for (const a of apis) {
    const raw = apiRaw.get(a.metadata.name)!;
    if (outcomes.has(raw)) continue;
    // what `kubectl get apidefinitions` prints, the same for the classic and the OAS form
    const c = compiled.get(a.metadata.name);
    const shown = c && {
      listenPath: c.listenPath,
      ...(c.apiLimit ? { rate: c.apiLimit.rate, per: c.apiLimit.per } : {}),
    };
    outcomes.set(
      raw,
      tooLarge ? notReady('ConfigTooLarge', tooLarge, shown) : ok(`compiled into ConfigMap ${CONFIG_MAP_NAME}`, shown),
    );
  }
  for (const p of policies) {
    const raw = policyRaw.get(p.metadata.name)!;
    const referenced = Object.keys(p.spec.access_rights ?? {});
    const present = referenced.filter((id) => apiIds.has(id)).sort();
    const missing = referenced.filter((id) => !apiIds.has(id)).sort();
    const keys = (keysByPolicy.get(p.metadata.name) ?? []).sort();
    const extra = { apis: present, keys: keys.slice(0, POLICY_STATUS_KEYS), keyCount: keys.length };
    if (outcomes.has(raw)) continue;
    if (missing.length)
      outcomes.set(
        raw,
        notReady('ApiNotFound', `access_rights name API(s) not found in namespace ${ns}: ${missing.join(', ')}`, extra),
      );
    else outcomes.set(raw, ok(`applied to ${keys.length} key(s)`, extra));
  }
  for (const [raw, outcome] of outcomes) {
    const isApi = (raw as { kind?: string }).kind === 'ApiDefinition';
    await report(ctx, isApi ? REFS.ApiDefinition : REFS.Policy, isApi ? inf.apis : inf.policies, raw, outcome);
  }
}

async function writeConfigMap(
  ctx: OperatorContext,
  ns: string,
  text: string,
  hash: string,
  owners: KubeObject[],
  existing: KubeObject | undefined,
): Promise<void> {
  const ownerReferences = owners
    .filter((o) => o.metadata.uid)
    .map((o) => ({
      apiVersion: API_VERSION,
      kind: String((o as { kind?: string }).kind),
      name: o.metadata.name,
      uid: o.metadata.uid!,
    }))
    .sort((a, b) => a.uid.localeCompare(b.uid));
  const cur = existing ? ConfigMapWithMeta.safeParse(existing) : undefined;
  const curOwners = JSON.stringify(
    (
      (
        existing as
          | { metadata: { ownerReferences?: { uid: string; kind: string; name: string; apiVersion: string }[] } }
          | undefined
      )?.metadata.ownerReferences ?? []
    )
      .map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid }))
      .sort((a, b) => a.uid.localeCompare(b.uid)),
  );
  if (
    cur?.success &&
    cur.data.data?.[CONFIG_MAP_KEY] === text &&
    cur.data.metadata.annotations?.[CONFIG_HASH_ANNOTATION] === hash &&
    curOwners === JSON.stringify(ownerReferences)
  ) {
    return;
  }
  const body = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: CONFIG_MAP_NAME,
      namespace: ns,
      labels: { ...MANAGED_BY },
      annotations: { [CONFIG_HASH_ANNOTATION]: hash },
      ownerReferences,
      ...(existing ? { resourceVersion: existing.metadata.resourceVersion } : {}),
    },
    data: { [CONFIG_MAP_KEY]: text },
  };
  const written = existing
    ? await ctx.api.put(resourcePath(REFS.ConfigMap, ns, CONFIG_MAP_NAME), body)
    : await ctx.api.post(resourcePath(REFS.ConfigMap, ns), body);
  ctx.metrics.writes.inc({ target: 'configmap' });
  ctx.informers.configMaps.remember(written);
  ctx.logger.info(
    { namespace: ns, hash, bytes: Buffer.byteLength(text) },
    existing ? 'config map updated' : 'config map created',
  );
}
