/**
 * Waiting for one object to reach a state (e.g. a controller's status catching up with a write): an
 * informer narrowed to the object by field selector (metadata.name), so its list returns that object and
 * its watch carries only that object's changes. The answer comes with the event that satisfies it, not at
 * the next poll.
 */
import type { Logger } from '../logger.js';
import type { KubeApi } from './api.js';
import { Informer, type KubeObject, type ResourceRef } from './informer.js';

export interface WaitForObjectOptions {
  api: KubeApi;
  resource: ResourceRef;
  namespace: string;
  name: string;
  /** Whether the object (undefined once it is gone) is in the awaited state; called on every change. */
  done: (obj: KubeObject | undefined) => boolean;
  timeoutMs: number;
  logger: Logger;
}

/**
 * Resolves true once `done` holds, false when timeoutMs passes first. A list or watch the API server
 * fails (or a `done` that throws) rejects with that error: the caller's request fails as its own read would.
 */
export function waitForObject(o: WaitForObjectOptions): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    let settled = false;
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      informer.stop();
      settle();
    };
    const check = (): void => {
      if (settled || !informer.hasSynced()) return;
      let ok: boolean;
      try {
        ok = o.done(informer.get(o.namespace, o.name));
      } catch (e) {
        finish(() => reject(e as Error));
        return;
      }
      if (ok) finish(() => resolve(true));
    };
    const informer = new Informer({
      api: o.api,
      resource: o.resource,
      namespace: o.namespace,
      fieldSelector: `metadata.name=${o.name}`,
      logger: o.logger,
      onChange: check,
      onError: (err) => finish(() => reject(err)),
    });
    const timer = setTimeout(() => finish(() => resolve(false)), o.timeoutMs);
    informer.start();
    void informer.whenSynced().then(check);
  });
}
