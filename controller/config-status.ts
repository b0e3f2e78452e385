/**
 * The statuses of a namespace's ApiDefinitions and Policies, written apart from its ConfigMaps: a Config
 * reconcile writes the ConfigMaps, leaves its outcomes here and returns, and the queue key
 * `ConfigStatus|<ns>` writes them (16 at a time, each only when it differs; an outcome already written for the
 * object's current resourceVersion is not even compared). So the ConfigMaps of the next
 * edit are not held behind hundreds of status writes of the previous reconcile. A newer plan supersedes
 * one being written: the writer stops, and the queue runs the key again with the newest plan. An outcome
 * is written only while the cached resource is the one it was computed for (same uid and generation).
 */
import type { KubeObject } from '../lib/kube/informer.js';
import { REFS, report, type OperatorContext, type StatusPlans } from './context.js';
import type { Outcome } from './status.js';

/** Status writes in flight at once. */
const STATUS_WRITES = 16;

interface PlannedStatus {
  api: boolean;
  name: string;
  uid: unknown;
  generation: unknown;
  outcome: Outcome;
}

interface Plan {
  items: PlannedStatus[];
  settle?: (objects: Map<string, string>) => void;
}

/** An outcome as one comparable string. */
const signature = (o: Outcome): string =>
  `${o.ready ? 1 : 0}|${o.reason}|${o.message}|${JSON.stringify(o.extra ?? {})}`;

export class ConfigStatusPlans implements StatusPlans {
  private readonly plans = new Map<string, Plan>();
  /**
   * Per `namespace/Kind/name`, the outcome last written or found in the status, and the resourceVersion the
   * object had then: the same outcome for that same version is not compared again (a reconcile after one edit
   * of 10,000 APIs writes one status and looks at none of the others).
   */
  private readonly verified = new Map<string, { rv: string; sig: string }>();

  /**
   * The outcomes of a Config reconcile of `ns` (by the cached object they were computed from); `settle` is
   * called with the resourceVersion of every object (`Kind/name`) once all of them are written or found right.
   */
  set(ns: string, outcomes: Map<KubeObject, Outcome>, settle?: (objects: Map<string, string>) => void): void {
    const items: PlannedStatus[] = [];
    for (const [raw, outcome] of outcomes)
      items.push({
        api: (raw as { kind?: string }).kind === 'ApiDefinition',
        name: raw.metadata.name,
        uid: raw.metadata.uid,
        generation: (raw.metadata as { generation?: unknown }).generation,
        outcome,
      });
    this.plans.set(ns, { items, settle });
  }

  /** Writes the newest plan of `ns`; stops early when a newer one arrives (then run again). */
  async write(ctx: OperatorContext, ns: string): Promise<void> {
    const current = this.plans.get(ns);
    if (!current) return;
    const plan = current.items;
    const superseded = (): boolean => this.plans.get(ns) !== current;
    const versions = new Map<string, string>();
    let complete = true;
    let next = 0;
    const writer = async (): Promise<void> => {
      for (let i = next++; i < plan.length && !superseded(); i = next++) {
        const it = plan[i]!;
        const inf = it.api ? ctx.informers.apis : ctx.informers.policies;
        const cur = inf.get(ns, it.name);
        if (
          !cur ||
          cur.metadata.uid !== it.uid ||
          (cur.metadata as { generation?: unknown }).generation !== it.generation
        ) {
          complete = false;
          continue; // replaced since: the Config reconcile its change queued plans it anew
        }
        const id = `${ns}/${it.api ? 'ApiDefinition' : 'Policy'}/${it.name}`;
        const sig = signature(it.outcome);
        const known = this.verified.get(id);
        let rv: string | undefined;
        if (known && known.rv === cur.metadata.resourceVersion && known.sig === sig) rv = known.rv;
        else {
          rv = await report(ctx, it.api ? REFS.ApiDefinition : REFS.Policy, inf, cur, it.outcome);
          if (rv !== undefined) this.verified.set(id, { rv, sig });
        }
        if (rv === undefined) complete = false;
        else versions.set(`${it.api ? 'ApiDefinition' : 'Policy'}/${it.name}`, rv);
      }
    };
    await Promise.all(Array.from({ length: Math.min(STATUS_WRITES, plan.length) }, writer));
    if (superseded()) return;
    this.plans.delete(ns);
    // the namespace's objects gone since are forgotten with the next complete plan
    if (complete) {
      for (const id of this.verified.keys())
        if (id.startsWith(`${ns}/`) && !versions.has(id.slice(ns.length + 1))) this.verified.delete(id);
      current.settle?.(versions);
    }
  }
}
