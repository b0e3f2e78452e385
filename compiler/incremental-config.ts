/**
 * compileConfig (compiler/compile-config.ts) kept up to date edit by edit: the same config and the same
 * refusals as compiling the whole set with `serving` = the previous config's APIs, at a cost that follows
 * the edit, not the number of APIs. The standalone reconciler feeds it every snapshot of the directory.
 *
 * Why an edit can be applied locally: an API is refused only for a clash (same listen path, or same
 * namespace/api_id) with an API accepted before it in precedence order. APIs that share neither key with
 * an added or removed one, directly or through a chain of clashing APIs, keep their fate; only the APIs
 * so connected to the edit are decided again, in precedence order (serving first, then the oldest, then
 * directory order). Work over the whole list (the diff, the hash) is cut into slices that let requests
 * through (lib/yielder.ts).
 */
import type { ApiDefinition, Policy } from '../crds/kinds.js';
import type { CompiledApi, CompiledConfig, CompiledPolicy } from '../contract/config.js';
import { apiIdOf } from '../crds/schemas/api-definition.js';
import { compiledOf, configHash, policiesOf, type CompileProblem } from './compile-config.js';
import { Yielder } from '../lib/yielder.js';

const nsName = (r: { metadata: { namespace: string; name: string } }): string =>
  `${r.metadata.namespace}/${r.metadata.name}`;
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const createdAt = (r: { metadata: Record<string, unknown> }): string =>
  typeof r.metadata.creationTimestamp === 'string' ? r.metadata.creationTimestamp : '';
/** The served list's order: longest listen path first, then by listen path (compileConfig's). */
const servedOrder = (a: CompiledApi, b: CompiledApi): number =>
  b.listenPath.length - a.listenPath.length || cmp(a.listenPath, b.listenPath);

/** The clash keys of an API: its listen path and its namespace/api_id (prefixed apart). */
function keysOf(api: CompiledApi): [string, string] {
  return [`L${api.listenPath}`, `I${api.namespace}/${api.api_id}`];
}

/**
 * What ties APIs into one neighbourhood: the clash keys, and the namespace/name (two manifests of one
 * name share their `serving` standing, so they are decided together).
 */
function linksOf(api: CompiledApi): [string, string, string] {
  return [...keysOf(api), `N${api.namespace}/${api.name}`];
}

function addTo<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  const s = m.get(k);
  if (s) s.add(v);
  else m.set(k, new Set([v]));
}

function removeFrom<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  const s = m.get(k);
  if (!s) return;
  s.delete(v);
  if (!s.size) m.delete(k);
}

function bump(m: Map<string, number>, k: string, by: number): void {
  const n = (m.get(k) ?? 0) + by;
  if (n > 0) m.set(k, n);
  else m.delete(k);
}

/** What one update changed, for the layers that keep their own derived state. */
export interface ConfigDelta {
  /** The set of `namespace/api_id` over every ApiDefinition (refused ones too) changed. */
  apiIdsChanged: boolean;
  /** The Policies given differ from the last update's. */
  policiesChanged: boolean;
  /** ApiDefinitions looked at again (clash neighbourhoods of the edit); counted by tests. */
  decided: number;
}

export class IncrementalCompiler {
  private inputs: readonly ApiDefinition[] = [];
  private present = new Set<ApiDefinition>();
  private policies: readonly Policy[] = [];
  private pols: Record<string, CompiledPolicy> = {};
  /** Every compilable input by clash key and by namespace/name (linksOf). */
  private byKey = new Map<string, Set<ApiDefinition>>();
  /** The accepted input holding each clash key. */
  private holder = new Map<string, ApiDefinition>();
  private accepted = new Set<ApiDefinition>();
  /** namespace/name of the accepted inputs (the next update's `serving`), with how many hold it. */
  private servingNames = new Map<string, number>();
  private problems = new Map<ApiDefinition, CompileProblem>();
  /** namespace/api_id of every input, with how many. */
  private apiIds = new Map<string, number>();
  private served: CompiledApi[] = [];
  private config: CompiledConfig = { hash: '', apis: [], policies: {} };
  private problemList: CompileProblem[] = [];

  current(): { config: CompiledConfig; problems: CompileProblem[] } {
    return { config: this.config, problems: this.problemList };
  }

  /** The config for these resources (the same objects as last time: the same config object). */
  async update(
    apis: readonly ApiDefinition[],
    policies: readonly Policy[],
  ): Promise<{ config: CompiledConfig; problems: CompileProblem[]; delta: ConfigDelta }> {
    const y = new Yielder();
    const policiesChanged = !sameItems(policies, this.policies);
    const { removed, added } = await this.diff(apis, y);
    // (the first update always compiles: an empty directory has a config too, with compileConfig's hash)
    if (!removed.length && !added.length && !policiesChanged && this.config.hash !== '')
      return { ...this.current(), delta: { apiIdsChanged: false, policiesChanged: false, decided: 0 } };

    // the clash neighbourhood of the edit: every input reachable from an edited API's keys
    const idsTouched = new Map<string, boolean>(); // namespace/api_id → whether it existed before
    const touchId = (r: ApiDefinition, by: number): void => {
      const id = `${r.metadata.namespace}/${apiIdOf(r)}`;
      if (!idsTouched.has(id)) idsTouched.set(id, this.apiIds.has(id));
      bump(this.apiIds, id, by);
    };
    const seedKeys: string[] = [];
    const acceptedBefore = new Set<ApiDefinition>();
    let n = 0;
    for (const r of removed) {
      if ((++n & 63) === 0) await y.maybe();
      this.present.delete(r);
      touchId(r, -1);
      if (this.accepted.has(r)) acceptedBefore.add(r);
      this.problems.delete(r);
      const c = compiledOf(r);
      if ('api' in c)
        for (const k of linksOf(c.api)) {
          seedKeys.push(k);
          removeFrom(this.byKey, k, r);
        }
    }
    const members = new Set<ApiDefinition>();
    for (const r of added) {
      if ((++n & 7) === 0) await y.maybe();
      this.present.add(r);
      touchId(r, 1);
      members.add(r);
      const c = compiledOf(r);
      if ('api' in c)
        for (const k of linksOf(c.api)) {
          seedKeys.push(k);
          addTo(this.byKey, k, r);
        }
    }
    let apiIdsChanged = false;
    for (const [id, before] of idsTouched) if (this.apiIds.has(id) !== before) apiIdsChanged = true;
    const seen = new Set<string>();
    while (seedKeys.length) {
      if ((++n & 255) === 0) await y.maybe();
      const k = seedKeys.pop()!;
      if (seen.has(k)) continue;
      seen.add(k);
      for (const r of this.byKey.get(k) ?? []) {
        if (members.has(r)) continue;
        members.add(r);
        const c = compiledOf(r);
        if ('api' in c) seedKeys.push(...linksOf(c.api));
      }
    }

    // decided again in precedence order; `serving` is the config in force before this update
    for (const r of members) if (this.accepted.has(r)) acceptedBefore.add(r);
    for (const r of acceptedBefore) {
      if ((++n & 255) === 0) await y.maybe();
      this.accepted.delete(r);
      const c = compiledOf(r);
      if ('api' in c) for (const k of keysOf(c.api)) if (this.holder.get(k) === r) this.holder.delete(k);
    }
    const ordered = await this.precedence(members, apis, y);
    const acceptedNow = new Set<ApiDefinition>();
    for (const res of ordered) {
      if ((++n & 63) === 0) await y.maybe();
      this.problems.delete(res);
      const where = {
        kind: 'ApiDefinition' as const,
        namespace: res.metadata.namespace,
        name: res.metadata.name,
        resource: res,
      };
      const c = compiledOf(res);
      if ('error' in c) {
        this.problems.set(res, { ...where, message: c.error });
        continue;
      }
      const [lk, ik] = keysOf(c.api);
      const clashWith = this.holder.get(lk) ?? this.holder.get(ik);
      if (clashWith) {
        const clash = (compiledOf(clashWith) as { api: CompiledApi }).api;
        this.problems.set(res, {
          ...where,
          message: `conflicts with ApiDefinition ${clash.namespace}/${clash.name} (same listen path or api_id)`,
          conflictsWith: clashWith,
        });
        continue;
      }
      this.holder.set(lk, res);
      this.holder.set(ik, res);
      this.accepted.add(res);
      acceptedNow.add(res);
    }

    // the served list: what left taken out, what came in put in its place (the list stays sorted)
    const leaving = new Set<CompiledApi>();
    for (const r of acceptedBefore) {
      if (acceptedNow.has(r)) continue;
      bump(this.servingNames, nsName(r), -1);
      leaving.add((compiledOf(r) as { api: CompiledApi }).api);
    }
    const coming: CompiledApi[] = [];
    for (const r of acceptedNow) {
      if (acceptedBefore.has(r)) continue;
      bump(this.servingNames, nsName(r), 1);
      coming.push((compiledOf(r) as { api: CompiledApi }).api);
    }
    let served: CompiledApi[];
    if (coming.length > 64 || leaving.size > 64) served = await mergeServed(this.served, leaving, coming, y);
    else {
      served = leaving.size ? this.served.filter((a) => !leaving.has(a)) : [...this.served];
      for (const a of coming) served.splice(insertionPoint(served, a), 0, a);
    }
    this.served = served;

    if (policiesChanged) this.pols = policiesOf(policies);
    this.inputs = apis;
    this.policies = policies;
    this.problemList = [...this.problems.values()];
    this.config = { hash: await configHash(served, this.pols, y), apis: served, policies: this.pols };
    return { ...this.current(), delta: { apiIdsChanged, policiesChanged, decided: members.size } };
  }

  /**
   * The inputs gone and the inputs new since the last update (by identity: an edited file is parsed into
   * new objects). The common head and tail are skipped by identity first; only the middle is looked up.
   */
  private async diff(
    apis: readonly ApiDefinition[],
    y: Yielder,
  ): Promise<{ removed: ApiDefinition[]; added: ApiDefinition[] }> {
    const old = this.inputs;
    if (old === apis) return { removed: [], added: [] };
    let head = 0;
    const min = Math.min(old.length, apis.length);
    while (head < min && old[head] === apis[head]) head++;
    let tail = 0;
    while (tail < min - head && old[old.length - 1 - tail] === apis[apis.length - 1 - tail]) tail++;
    const removed: ApiDefinition[] = [];
    const added: ApiDefinition[] = [];
    const newMiddle = new Set<ApiDefinition>();
    for (let i = head; i < apis.length - tail; i++) {
      if ((i & 1023) === 0) await y.maybe();
      newMiddle.add(apis[i]!);
      if (!this.present.has(apis[i]!)) added.push(apis[i]!);
    }
    for (let i = head; i < old.length - tail; i++) {
      if ((i & 1023) === 0) await y.maybe();
      if (!newMiddle.has(old[i]!)) removed.push(old[i]!);
    }
    return { removed, added };
  }

  /** compileConfig's precedence over `members`: serving first, then oldest, then their order in `apis`. */
  private async precedence(
    members: Set<ApiDefinition>,
    apis: readonly ApiDefinition[],
    y: Yielder,
  ): Promise<ApiDefinition[]> {
    const index = new Map<ApiDefinition, number>();
    if (members.size > 1) {
      for (let i = 0; i < apis.length; i++) {
        if ((i & 1023) === 0) await y.maybe();
        if (members.has(apis[i]!)) index.set(apis[i]!, i);
      }
    }
    return [...members]
      .map((r) => ({ r, i: index.get(r) ?? 0, t: createdAt(r), s: this.servingNames.has(nsName(r)) ? 0 : 1 }))
      .sort((a, b) => a.s - b.s || cmp(a.t, b.t) || (a.t && b.t ? cmp(nsName(a.r), nsName(b.r)) : 0) || a.i - b.i)
      .map((x) => x.r);
  }
}

function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * `served` without `leaving`, with `coming` merged in (both lists in served order): the new ones sorted,
 * then one pass over the list, in slices (a burst brings thousands of APIs into thousands).
 */
async function mergeServed(
  served: readonly CompiledApi[],
  leaving: ReadonlySet<CompiledApi>,
  coming: CompiledApi[],
  y: Yielder,
): Promise<CompiledApi[]> {
  const extra = coming.sort(servedOrder);
  await y.maybe();
  const out: CompiledApi[] = [];
  let j = 0;
  for (let i = 0; i < served.length; i++) {
    if ((i & 1023) === 0) await y.maybe();
    const a = served[i]!;
    if (leaving.has(a)) continue;
    while (j < extra.length && servedOrder(extra[j]!, a) < 0) out.push(extra[j++]!);
    out.push(a);
  }
  while (j < extra.length) out.push(extra[j++]!);
  return out;
}

/** Where `a` goes in a list in served order (binary search). */
function insertionPoint(list: readonly CompiledApi[], a: CompiledApi): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (servedOrder(list[mid]!, a) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
