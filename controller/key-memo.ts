/**
 * What the last successful reconcile of each AccessKey found and wrote, so that a reconcile or a full resync
 * of a key that has not changed costs a few map lookups instead of a validation, a store read and a status
 * comparison. A memo holds while:
 *   - the cached object is the one the reconcile left (same resourceVersion: any change of spec, metadata or
 *     status, ours included, is a new one; our own status write is recorded as the version it produced);
 *   - its inputs are as they were: each policy it applies (uid + generation, or missing), whether each API of
 *     its access_rights exists, and the resourceVersion of the Secret of its secretRef (a key whose Secret is
 *     not in the informer cache — a user's unlabelled Secret, read by name — gets no memo: only a full
 *     reconcile reads it);
 *   - it still owns its key hash.
 * The session it wrote (`json`) is what a resync compares the store against (one MGET per batch of keys in
 * key-audit.ts); a key whose session differs, or that has no memo, is reconciled in full. A failed or refused
 * reconcile forgets the memo.
 */
import type { Informer, KubeObject } from '../lib/kube/informer.js';

/** What a memo is checked against (the operator's context; named here, context.ts refers to this file). */
export interface MemoContext {
  informers: { keys: Informer; policies: Informer; secrets: Informer };
  apiIds: { has(ns: string, apiId: string): boolean };
  keyOwners: Map<string, string>;
}

export interface KeyMemo {
  /** resourceVersion of the cached object the reconcile left. */
  rv: string;
  uid: string | undefined;
  hash: string;
  /** The session JSON in the store. */
  json: string;
  policies: string[];
  apis: string[];
  /** The Secret of spec.secretRef (it is in the informer cache). */
  secret?: string;
  /** inputs() when it was recorded. */
  inputs: string;
}

/** The state of a key's inputs as one string (compared, never parsed). */
function inputs(ctx: MemoContext, ns: string, m: Pick<KeyMemo, 'policies' | 'apis' | 'secret'>): string {
  let s = '';
  for (const p of m.policies) {
    const r = ctx.informers.policies.get(ns, p);
    s += r ? `${r.metadata.uid ?? ''}:${String(r.metadata.generation ?? '')}|` : '-|';
  }
  for (const a of m.apis) s += ctx.apiIds.has(ns, a) ? '1' : '0';
  if (m.secret !== undefined) s += `|${ctx.informers.secrets.get(ns, m.secret)?.metadata.resourceVersion ?? '-'}`;
  return s;
}

export class KeyMemos {
  private readonly memos = new Map<string, KeyMemo>();

  /**
   * Records a reconcile that stored the session: `expectedRv` is the resourceVersion its status write produced
   * (or the one it read when nothing was written). Not recorded when the cached object moved on meanwhile.
   */
  record(
    ctx: MemoContext,
    ns: string,
    name: string,
    expectedRv: string | undefined,
    m: Omit<KeyMemo, 'rv' | 'uid' | 'inputs'>,
  ): void {
    const cur = ctx.informers.keys.get(ns, name);
    const rv = cur?.metadata.resourceVersion;
    // expectedRv is undefined when the status write landed on a newer spec (context.ts report(): requeued)
    if (!cur || rv === undefined || rv !== expectedRv) return this.forget(ns, name);
    if (m.secret !== undefined && !ctx.informers.secrets.get(ns, m.secret)) return this.forget(ns, name);
    this.memos.set(`${ns}/${name}`, { ...m, rv, uid: cur.metadata.uid, inputs: inputs(ctx, ns, m) });
  }

  forget(ns: string, name: string): void {
    this.memos.delete(`${ns}/${name}`);
  }

  /** The memo of `raw` when it still holds (see the top of this file), else undefined. */
  current(ctx: MemoContext, raw: KubeObject): KeyMemo | undefined {
    const ns = raw.metadata.namespace ?? 'default';
    const name = raw.metadata.name;
    const m = this.memos.get(`${ns}/${name}`);
    if (!m) return undefined;
    if (
      m.rv !== raw.metadata.resourceVersion ||
      m.uid !== raw.metadata.uid ||
      raw.metadata.deletionTimestamp ||
      ctx.keyOwners.get(m.hash) !== `${ns}/${name}` ||
      inputs(ctx, ns, m) !== m.inputs
    )
      return undefined;
    return m;
  }

  size(): number {
    return this.memos.size;
  }
}
