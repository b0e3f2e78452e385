/**
 * Smoothing events from sidecars (Redis pub/sub channel gw:events:smoothing, lib/events.ts) → a
 * Kubernetes Event on the resource that configured the limit: the ApiDefinition for API-scope buckets
 * (`a:<ns>/<api_id>…`); for key buckets the Policy whose limit and smoothing the key follows (the
 * payload's `policy`), else the AccessKey owning the key hash (`k:h:<hash>…`); for custom-key buckets
 * (`k:p:…`) from a sidecar that does not name the policy, the first Policy with a rate_limit_pattern. Every controller subscribes; only the
 * leader records. Payloads are validated; bad ones are dropped.
 */
import type { Redis, Cluster } from 'ioredis';
import { SMOOTHING_CHANNEL, SmoothingEventPayload } from '../lib/events.js';
import type { Logger } from '../lib/logger.js';
import { apiIdOf, type ApiIdSource } from '../crds/schemas/api-definition.js';
import { REFS, type OperatorContext } from './context.js';
import type { KubeObject, ResourceRef } from '../lib/kube/informer.js';
import { closeStoreClient } from '../lib/store/redis.js';

export class SmoothingEvents {
  private sub?: Redis | Cluster;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly ctx: OperatorContext,
    private readonly isLeader: () => boolean,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    const sub =
      'nodes' in this.redis
        ? this.redis.duplicate()
        : this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.sub = sub;
    sub.on('error', () => undefined);
    sub.on('message', (_ch: string, text: string) => void this.onMessage(text));
    await sub
      .subscribe(SMOOTHING_CHANNEL)
      .catch((e: unknown) => this.logger.warn({ err: (e as Error).message }, 'smoothing events unavailable'));
  }

  async stop(): Promise<void> {
    if (this.sub) await closeStoreClient(this.sub);
  }

  /** The resource an event belongs to, or undefined. */
  target(limiterKey: string, ns: string, policy?: string): { ref: ResourceRef; obj: KubeObject } | undefined {
    const inf = this.ctx.informers;
    // a key limit a policy configured: the event goes on that policy (sidecars name it)
    if (policy !== undefined && limiterKey.startsWith('k:')) {
      const obj = inf.policies.get(ns, policy);
      if (obj) return { ref: REFS.Policy, obj };
    }
    const api = /^a:([^/]+)\/([^:]+)/.exec(limiterKey);
    if (api) {
      // raw cached objects, not validated: apiIdOf tolerates any missing level
      const obj = inf.apis.list(api[1]).find((o) => apiIdOf(o as ApiIdSource) === api[2]);
      return obj && { ref: REFS.ApiDefinition, obj };
    }
    const key = /^k:h:([0-9a-f]{64})/.exec(limiterKey);
    if (key) {
      const owner = this.ctx.keyOwners.get(key[1]!);
      if (!owner) return undefined;
      const [kns, name] = owner.split('/') as [string, string];
      const obj = inf.keys.get(kns, name);
      return obj && { ref: REFS.AccessKey, obj };
    }
    if (limiterKey.startsWith('k:p:')) {
      const obj = inf.policies
        .list(ns)
        .find(
          (o) =>
            typeof (o as { spec?: { meta_data?: { rate_limit_pattern?: unknown } } }).spec?.meta_data
              ?.rate_limit_pattern === 'string',
        );
      return obj && { ref: REFS.Policy, obj };
    }
    return undefined;
  }

  private async onMessage(text: string): Promise<void> {
    let payload;
    try {
      payload = SmoothingEventPayload.safeParse(JSON.parse(text));
    } catch {
      return;
    }
    if (!payload.success) return;
    const e = payload.data;
    this.ctx.metrics.smoothingEvents.inc({ event: e.event });
    if (!this.isLeader()) return;
    const t = this.target(e.limiter_key, e.namespace, e.policy);
    if (!t) return;
    await this.ctx.events.record(
      t.ref,
      t.obj,
      'Normal',
      e.event,
      `api_id=${e.api_id} limiter_key=${e.limiter_key} allowance ${e.old_allowance} → ${e.new_allowance} at ${e.time}`,
    );
  }
}
