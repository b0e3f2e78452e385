/**
 * Status of the four kinds (docs/contract.md#resources): observedGeneration and the Ready condition with a reason and a
 * short message, plus kind-specific fields. Written through the status subresource only when it
 * differs from what the object already says (lastTransitionTime ignored), so a resync writes nothing.
 */
import type { KubeObject } from '../lib/kube/informer.js';
import type { ResourceRef } from '../lib/kube/informer.js';
import { resourcePath, type KubeApi } from '../lib/kube/api.js';

export type Reason =
  | 'Reconciled'
  | 'InvalidSpec'
  | 'PolicyNotFound'
  | 'PolicyInactive'
  | 'ApiNotFound'
  | 'SecretNotFound'
  | 'StoreUnavailable'
  | 'ConfigTooLarge';

export interface Outcome {
  ready: boolean;
  reason: Reason;
  message: string;
  /** Extra status fields (e.g. keyHash, apis, keys). */
  extra?: Record<string, unknown>;
}

/** A Kubernetes Time (RFC 3339, whole seconds) as conditions and Events carry it. */
export const kubeTime = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

export const ok = (message = 'reconciled', extra?: Record<string, unknown>): Outcome => ({
  ready: true,
  reason: 'Reconciled',
  message,
  extra,
});
export const notReady = (reason: Reason, message: string, extra?: Record<string, unknown>): Outcome => ({
  ready: false,
  reason,
  message,
  extra,
});
/** Not ready for several missing things at once: every one named, the reason is the first one's. */
export const notReadyAll = (missing: [Reason, string][], extra?: Record<string, unknown>): Outcome | undefined =>
  missing.length ? notReady(missing[0]![0], missing.map(([, m]) => m).join('; '), extra) : undefined;

interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

function currentStatus(obj: KubeObject): { conditions?: Condition[]; [k: string]: unknown } {
  const s = (obj as { status?: unknown }).status;
  return s && typeof s === 'object' ? (s as { conditions?: Condition[] }) : {};
}

export function readyCondition(obj: KubeObject): Condition | undefined {
  return currentStatus(obj).conditions?.find((c) => c.type === 'Ready');
}

export function desiredStatus(obj: KubeObject, outcome: Outcome, nowIso: string): Record<string, unknown> {
  const prev = readyCondition(obj);
  const status = outcome.ready ? 'True' : 'False';
  const generation = obj.metadata.generation ?? 0;
  return {
    ...(outcome.extra ?? {}),
    observedGeneration: generation,
    conditions: [
      {
        type: 'Ready',
        status,
        reason: outcome.reason,
        message: outcome.message.slice(0, 1024),
        lastTransitionTime: prev && prev.status === status ? (prev.lastTransitionTime ?? nowIso) : nowIso,
        observedGeneration: generation,
      },
    ],
  };
}

const strip = (s: Record<string, unknown>): string =>
  JSON.stringify(s, (k, v: unknown) => (k === 'lastTransitionTime' ? undefined : v), 0);

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

export function statusEqual(obj: KubeObject, desired: Record<string, unknown>): boolean {
  return (
    strip(canonical(currentStatus(obj)) as Record<string, unknown>) ===
    strip(canonical(desired) as Record<string, unknown>)
  );
}

export class StatusWriter {
  constructor(
    private readonly api: KubeApi,
    private readonly onWrite: () => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** Returns the written object, or undefined when nothing had to be written. */
  async write(ref: ResourceRef, obj: KubeObject, outcome: Outcome): Promise<unknown> {
    const desired = desiredStatus(obj, outcome, kubeTime(new Date(this.now())));
    if (statusEqual(obj, desired)) return undefined;
    const path = resourcePath(ref, obj.metadata.namespace, obj.metadata.name, 'status');
    const written = await this.api.patch(path, [{ op: 'add', path: '/status', value: desired }], 'json');
    this.onWrite();
    return written;
  }
}
