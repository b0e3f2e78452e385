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

  update(obj: KubeObject, deleted: boolean): void {
    const ns = obj.metadata.namespace ?? 'default';
    const k = `${ns}/${obj.metadata.name}`;
    const old = this.byName.get(k);
    if (old !== undefined) {
      this.byName.delete(k);
      const m = this.ids.get(ns)!;
      const n = (m.get(old) ?? 1) - 1;
      if (n > 0) m.set(old, n);
      else m.delete(old);
      if (!m.size) this.ids.delete(ns);
    }
    if (deleted) return;
    const r = ApiDefinitionResource.safeParse(obj);
    if (!r.success) return;
    const id = apiIdOf(r.data);
    this.byName.set(k, id);
    let m = this.ids.get(ns);
    if (!m) this.ids.set(ns, (m = new Map()));
    m.set(id, (m.get(id) ?? 0) + 1);
  }

  has(ns: string, apiId: string): boolean {
    return this.ids.get(ns)?.has(apiId) ?? false;
  }
}
