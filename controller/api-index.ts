/**
 * The api_ids of the valid ApiDefinitions per namespace, kept current from the informer's events, so a
 * key reconcile checks its access_rights in O(1) instead of parsing every ApiDefinition of the namespace.
 * Each object is parsed once, when its event arrives.
 */
import { ApiDefinitionResource } from '../crds/kinds.js';
import { apiIdOf } from '../crds/schemas/api-definition.js';
import type { KubeObject } from '../lib/kube/informer.js';

export class ApiIdIndex {
  /** `ns/name` → api_id of each valid ApiDefinition. */
  private readonly byName = new Map<string, string>();
  /** ns → api_id → how many valid ApiDefinitions claim it (a conflict has two). */
  private readonly ids = new Map<string, Map<string, number>>();

  /** Follows one event; true when the namespace's set of api_ids changed (one appeared or went). */
  update(obj: KubeObject, deleted: boolean): boolean {
    const ns = obj.metadata.namespace ?? 'default';
    const k = `${ns}/${obj.metadata.name}`;
    const old = this.byName.get(k);
    let gone = false;
    if (old !== undefined) {
      this.byName.delete(k);
      const m = this.ids.get(ns)!;
      const n = (m.get(old) ?? 1) - 1;
      if (n > 0) m.set(old, n);
      else {
        m.delete(old);
        gone = true;
      }
      if (!m.size) this.ids.delete(ns);
    }
    const r = deleted ? undefined : ApiDefinitionResource.safeParse(obj);
    if (!r?.success) return gone;
    const id = apiIdOf(r.data);
    this.byName.set(k, id);
    let m = this.ids.get(ns);
    if (!m) this.ids.set(ns, (m = new Map()));
    const before = m.get(id) ?? 0;
    m.set(id, before + 1);
    // the same id gone and back (an edit that kept it) is no change
    return before === 0 ? !(gone && old === id) : gone;
  }

  has(ns: string, apiId: string): boolean {
    return this.ids.get(ns)?.has(apiId) ?? false;
  }
}
