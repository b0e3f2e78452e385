/**
 * `gw release-finalizers`: what the chart's pre-delete hook runs before `helm uninstall` removes the
 * controller (docs/helm.md, "Uninstall"). It stops the controller (its Deployment scaled to 0, then waits
 * until no controller pod is left, so none can put a finalizer back), then removes the controller's
 * finalizers from every AccessKey and OAuthClient it watches. Without it, a resource deleted after the
 * uninstall (or its namespace) waits forever for a controller that is gone.
 */
import type { Logger } from 'pino';
import { codeOf, resourcePath, type KubeApi } from '../lib/kube/api.js';
import { KubeObjectSchema, type KubeObject, type ResourceRef } from '../lib/kube/informer.js';
import { patchOutFinalizer, REFS } from './context.js';
import { KEY_FINALIZER } from './reconcile-key.js';
import { CLIENT_FINALIZER } from './reconcile-client.js';
import { z } from 'zod';

export interface ReleaseOptions {
  /** The controller's Deployment, `namespace/name`; absent: the controller is assumed stopped already. */
  controller?: { namespace: string; name: string };
  /** The namespace the controller watches (undefined: all). */
  namespace?: string;
  /** How long to wait for the controller's pods to go (ms). */
  stopTimeoutMs: number;
  pollMs?: number;
}

const DEPLOYMENTS = { group: 'apps', version: 'v1', plural: 'deployments' };
const PODS = { group: '', version: 'v1', plural: 'pods' };
const deploymentSchema = z.object({
  spec: z.object({ selector: z.object({ matchLabels: z.record(z.string(), z.string()) }) }),
});
const listSchema = z.object({ items: z.array(z.unknown()) });

const RELEASED: [ResourceRef, string][] = [
  [REFS.AccessKey, KEY_FINALIZER],
  [REFS.OAuthClient, CLIENT_FINALIZER],
];

/** Scales the controller to 0 and waits until none of its pods is left. */
async function stopController(api: KubeApi, opts: ReleaseOptions, logger: Logger): Promise<void> {
  const c = opts.controller!;
  const path = resourcePath(DEPLOYMENTS, c.namespace, c.name);
  let labels: Record<string, string>;
  try {
    labels = deploymentSchema.parse(await api.get(path)).spec.selector.matchLabels;
  } catch (e) {
    if (codeOf(e) === 404) return; // already gone
    throw e;
  }
  await api.patch(resourcePath(DEPLOYMENTS, c.namespace, c.name, 'scale'), { spec: { replicas: 0 } }, 'merge');
  const selector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const deadline = Date.now() + opts.stopTimeoutMs;
  for (;;) {
    const left = listSchema.parse(await api.get(resourcePath(PODS, c.namespace), { labelSelector: selector })).items;
    if (left.length === 0) break;
    if (Date.now() > deadline)
      throw new Error(`${c.namespace}/${c.name}: ${left.length} controller pod(s) still running after the scale to 0`);
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
  }
  logger.info({ deployment: `${c.namespace}/${c.name}` }, 'controller stopped');
}

/** Removes `finalizer` from one object, re-reading it after a conflict. Returns whether one was removed. */
async function release(api: KubeApi, ref: ResourceRef, obj: KubeObject, finalizer: string): Promise<boolean> {
  let cur = obj;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return (await patchOutFinalizer(api, ref, cur, finalizer)) !== undefined;
    } catch (e) {
      const code = codeOf(e);
      if (code === 404) return false;
      if (code !== 409 && code !== 422) throw e; // 422: the test op saw a newer resourceVersion
      try {
        cur = KubeObjectSchema.parse(await api.get(resourcePath(ref, cur.metadata.namespace, cur.metadata.name)));
      } catch (g) {
        if (codeOf(g) === 404) return false;
        throw g;
      }
    }
  }
  throw new Error(
    `${ref.plural} ${obj.metadata.namespace}/${obj.metadata.name}: finalizer not removed after 5 conflicts`,
  );
}

/** Stops the controller, then releases its finalizers. Returns how many were removed per kind. */
export async function releaseFinalizers(
  api: KubeApi,
  opts: ReleaseOptions,
  logger: Logger,
): Promise<Record<string, number>> {
  if (opts.controller) await stopController(api, opts, logger);
  const removed: Record<string, number> = {};
  for (const [ref, finalizer] of RELEASED) {
    let n = 0;
    const items = listSchema.parse(await api.get(resourcePath(ref, opts.namespace))).items;
    for (const raw of items) {
      const obj = KubeObjectSchema.parse(raw);
      if (await release(api, ref, obj, finalizer)) n++;
    }
    removed[ref.plural] = n;
  }
  logger.info({ removed }, 'finalizers released');
  return removed;
}
