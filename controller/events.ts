/**
 * Kubernetes Events (core/v1): failures of a reconcile (once per change of reason, not on every
 * retry) and smoothing events that sidecars publish over Redis (lib/events.ts). Only the leader
 * records. Messages never hold a raw key: limiter keys carry the key hash or a custom pattern.
 */
import type { Logger } from '../lib/logger.js';
import type { KubeObject, ResourceRef } from '../lib/kube/informer.js';
import { resourcePath, type KubeApi } from '../lib/kube/api.js';
import { kubeTime } from './status.js';

export class EventRecorder {
  constructor(
    private readonly api: KubeApi,
    private readonly instance: string,
    private readonly logger: Logger,
    private readonly onWrite: () => void,
  ) {}

  async record(
    ref: ResourceRef,
    obj: KubeObject,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const ns = obj.metadata.namespace ?? 'default';
    const now = kubeTime(new Date());
    const body = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${obj.metadata.name}.`, namespace: ns },
      involvedObject: {
        apiVersion: ref.group ? `${ref.group}/${ref.version}` : ref.version,
        kind: ref.kind,
        name: obj.metadata.name,
        namespace: ns,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      reason,
      message: message.slice(0, 1024),
      type,
      source: { component: 'gw-controller' },
      reportingComponent: 'gw-controller',
      reportingInstance: this.instance,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    try {
      await this.api.post(resourcePath({ group: '', version: 'v1', plural: 'events' }, ns), body);
      this.onWrite();
    } catch (e) {
      this.logger.warn({ err: (e as Error).message, reason }, 'could not record an Event');
    }
  }
}
