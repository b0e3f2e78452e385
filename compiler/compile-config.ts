/**
 * The set of ApiDefinitions and Policies → CompiledConfig (what sidecars enforce). A bad or
 * conflicting ApiDefinition is reported and left out; the others still compile. The result depends on
 * the resources only, not on the order they arrive in (an informer's order differs between a
 * long-running controller and a fresh one): of two conflicting APIs the one serving keeps serving (docs/contract.md#hostile-input:
 * `serving`, the namespace/names of the APIs in the config in force), else the older one wins
 * (creationTimestamp, then namespace/name; without timestamps, as in a manifests directory, the one read
 * first), and the policies are keyed in sorted order. Equal inputs, equal hash: a restart or a new leader rewrites nothing.
 */
import type { ApiDefinition, Policy } from '../crds/kinds.js';
import type { CompiledApi, CompiledConfig, CompiledPolicy } from '../contract/config.js';
import { compileApi } from './compile-api.js';
import type { Yielder } from '../lib/yielder.js';
const { createHash } = process.getBuiltinModule('node:crypto');

export interface CompileProblem {
  kind: 'ApiDefinition' | 'Policy';
  namespace: string;
  name: string;
  message: string;
  /** The refused resource and, for a conflict, the one that keeps its place (callers name their files). */
  resource: ApiDefinition | Policy;
  conflictsWith?: ApiDefinition;
}

const nsName = (r: { metadata: { namespace: string; name: string } }): string =>
  `${r.metadata.namespace}/${r.metadata.name}`;
/** Code-unit order: names and RFC 3339 timestamps are ASCII, and it costs a fraction of localeCompare (ICU). */
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const createdAt = (r: { metadata: Record<string, unknown> }): string =>
  typeof r.metadata.creationTimestamp === 'string' ? r.metadata.creationTimestamp : '';

/**
 * Serving first, then oldest first (creationTimestamp, then namespace/name); resources without a timestamp
 * keep their order.
 */
function precedence(apis: ApiDefinition[], serving: ReadonlySet<string>): ApiDefinition[] {
  return apis
    .map((r, i) => ({ r, i, t: createdAt(r), s: serving.has(nsName(r)) ? 0 : 1 }))
    .sort((a, b) => a.s - b.s || cmp(a.t, b.t) || (a.t && b.t ? cmp(nsName(a.r), nsName(b.r)) : 0) || a.i - b.i)
    .map((x) => x.r);
}

/** Each config's serving set, built once (a config is immutable once compiled). */
const servingSets = new WeakMap<CompiledConfig, ReadonlySet<string>>();

/** The namespace/names of the APIs a config serves (compileConfig's `serving`). */
export function servingApis(config: CompiledConfig | undefined): ReadonlySet<string> {
  if (!config) return new Set();
  let s = servingSets.get(config);
  if (!s) servingSets.set(config, (s = new Set(config.apis.map((a) => `${a.namespace}/${a.name}`))));
  return s;
}

/**
 * Each ApiDefinition compiled once: resources are immutable once read (a change is a new object), so a
 * config rebuilt after one edit compiles only the edited API.
 */
const compiledApis = new WeakMap<ApiDefinition, { api: CompiledApi } | { error: string }>();
const apiHashes = new WeakMap<CompiledApi, string>();

/** How many times an ApiDefinition was compiled (tests: an edit compiles only the edited API). */
export const compileCounter = { apis: 0 };

export function compiledOf(res: ApiDefinition): { api: CompiledApi } | { error: string } {
  let c = compiledApis.get(res);
  if (!c) {
    compileCounter.apis++;
    try {
      c = { api: compileApi(res) };
    } catch (e) {
      c = { error: (e as Error).message };
    }
    compiledApis.set(res, c);
  }
  return c;
}

function hashOf(api: CompiledApi): string {
  let h = apiHashes.get(api);
  if (!h) apiHashes.set(api, (h = createHash('sha256').update(JSON.stringify(api)).digest('hex')));
  return h;
}

export function compileConfig(
  apis: ApiDefinition[],
  policies: Policy[],
  serving: ReadonlySet<string> = new Set(),
): { config: CompiledConfig; problems: CompileProblem[] } {
  const { compiled, problems } = compileApis(apis, serving);
  const pols = policiesOf(policies);
  return { config: { hash: hashSync(compiled, pols), apis: compiled, policies: pols }, problems };
}

/**
 * compileConfig's APIs and problems without the config's hash (`gw validate` wants the refusals only):
 * the APIs that serve, longest listen path first, and what was refused.
 */
export function compileApis(
  apis: ApiDefinition[],
  serving: ReadonlySet<string> = new Set(),
): { compiled: CompiledApi[]; problems: CompileProblem[] } {
  const problems: CompileProblem[] = [];
  const compiled: CompiledApi[] = [];
  const byListen = new Map<string, CompiledApi>();
  const byId = new Map<string, CompiledApi>();
  const sourceOf = new Map<CompiledApi, ApiDefinition>();
  const where = (res: ApiDefinition) => ({
    kind: 'ApiDefinition' as const,
    namespace: res.metadata.namespace,
    name: res.metadata.name,
    resource: res,
  });
  for (const res of precedence(apis, serving)) {
    const c = compiledOf(res);
    if ('error' in c) {
      problems.push({ ...where(res), message: c.error });
      continue;
    }
    const api = c.api;
    const idKey = `${api.namespace}/${api.api_id}`;
    const clash = byListen.get(api.listenPath) ?? byId.get(idKey);
    if (clash) {
      problems.push({
        ...where(res),
        message: `conflicts with ApiDefinition ${clash.namespace}/${clash.name} (same listen path or api_id)`,
        conflictsWith: sourceOf.get(clash)!,
      });
      continue;
    }
    sourceOf.set(api, res);
    byListen.set(api.listenPath, api);
    byId.set(idKey, api);
    compiled.push(api);
  }
  compiled.sort((a, b) => b.listenPath.length - a.listenPath.length || cmp(a.listenPath, b.listenPath));
  return { compiled, problems };
}

/** The compiled policies, keyed by namespace/name in sorted order. */
export function policiesOf(policies: readonly Policy[]): Record<string, CompiledPolicy> {
  const pols: Record<string, CompiledPolicy> = {};
  for (const p of [...policies].sort((a, b) => cmp(nsName(a), nsName(b)))) {
    pols[nsName(p)] = { namespace: p.metadata.namespace, name: p.metadata.name, spec: p.spec };
  }
  return pols;
}

/**
 * The hash of the content: each API's own hash (computed once per resource) in order, then the policies
 * (one update of the joined hashes: the same digest as one update per API, without 10,000 native calls).
 */
function hashSync(apis: readonly CompiledApi[], pols: Record<string, CompiledPolicy>): string {
  const h = createHash('sha256');
  h.update(apis.map(hashOf).join(''));
  h.update(JSON.stringify(pols));
  return h.digest('hex').slice(0, 16);
}

/**
 * The same hash as compileConfig's, computed in slices that let requests through: an API's own hash is
 * computed once (JSON + SHA-256, tens of microseconds), so a list of cached ones goes fast and a list of
 * new ones (a burst of new files) checks the slice's time every HASH_CHECK APIs.
 */
const HASH_CHECK = 32;
export async function configHash(
  apis: readonly CompiledApi[],
  pols: Record<string, CompiledPolicy>,
  y: Yielder,
): Promise<string> {
  const h = createHash('sha256');
  let joined: string[] = [];
  for (let i = 0; i < apis.length; i++) {
    joined.push(hashOf(apis[i]!));
    if ((i + 1) % HASH_CHECK === 0 && y.due()) {
      h.update(joined.join(''));
      joined = [];
      await y.yield();
    }
  }
  h.update(joined.join(''));
  h.update(JSON.stringify(pols));
  return h.digest('hex').slice(0, 16);
}
