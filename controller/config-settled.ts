/**
 * Per namespace, what its last complete config reconcile left: the resourceVersion of every ApiDefinition and
 * Policy once its status was written (or found right), the resourceVersion of every config ConfigMap once
 * written (or found right), and the namespace's key epoch (bumped when an AccessKey that applies a policy is
 * added, removed or changes its spec: a Policy's status lists its keys). A full resync skips the namespace while the caches still
 * hold exactly those versions: nothing changed that the reconcile read or wrote, so it would parse, compile,
 * lay out and compare everything to write nothing. Any change — an edit, a hand edit of a status or a
 * ConfigMap, a deletion — is a new resourceVersion (or a missing or extra object) and the resync runs it.
 * "Complete": the ConfigStatus run of that reconcile's plan wrote every status, not superseded by a newer plan.
 */
import type { KubeObject } from '../lib/kube/informer.js';

/** The operator's caches this reads (context.ts's Informers; named here, context.ts refers to this file). */
type Informers = Record<'apis' | 'policies' | 'configMaps', { list(ns: string): KubeObject[] }>;

interface Settled {
  /** `Kind/name` → resourceVersion (ApiDefinitions and Policies). */
  objects: Map<string, string>;
  /** ConfigMap name → resourceVersion (the managed ones of the namespace). */
  configMaps: Map<string, string>;
  keyEpoch: number;
}

export class SettledConfigs {
  private readonly byNs = new Map<string, Settled>();
  private readonly epochs = new Map<string, number>();

  /** An AccessKey of `ns` that applies (or applied) a policy was added, removed or changed its spec. */
  bumpKeys(ns: string): void {
    this.epochs.set(ns, (this.epochs.get(ns) ?? 0) + 1);
  }

  keyEpoch(ns: string): number {
    return this.epochs.get(ns) ?? 0;
  }

  /** The resourceVersions of the namespace's managed ConfigMaps now (after a reconcile wrote them). */
  configMapVersions(inf: Informers, ns: string): Map<string, string> {
    return new Map(inf.configMaps.list(ns).map((c) => [c.metadata.name, c.metadata.resourceVersion ?? '']));
  }

  set(ns: string, s: Settled): void {
    this.byNs.set(ns, s);
  }

  forget(ns: string): void {
    this.byNs.delete(ns);
  }

  /** True when the caches hold exactly what the last complete reconcile of `ns` left. */
  holds(inf: Informers, ns: string): boolean {
    const s = this.byNs.get(ns);
    if (!s || s.keyEpoch !== this.keyEpoch(ns)) return false;
    const apis = inf.apis.list(ns);
    const policies = inf.policies.list(ns);
    if (apis.length + policies.length !== s.objects.size) return false;
    for (const o of apis)
      if (s.objects.get(`ApiDefinition/${o.metadata.name}`) !== o.metadata.resourceVersion) return false;
    for (const o of policies)
      if (s.objects.get(`Policy/${o.metadata.name}`) !== o.metadata.resourceVersion) return false;
    const cms = inf.configMaps.list(ns);
    if (cms.length !== s.configMaps.size) return false;
    for (const c of cms) if (s.configMaps.get(c.metadata.name) !== c.metadata.resourceVersion) return false;
    return true;
  }
}
