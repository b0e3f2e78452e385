/**
 * Leader election on a coordination.k8s.io/v1 Lease, client-go's algorithm: the holder renews every
 * retry period; a candidate takes the lease over once it has seen no change of the record for a whole
 * lease duration (measured on its own clock from when it observed the record, so clock skew between
 * nodes does not matter). A leader that cannot renew within the renew deadline (< lease duration)
 * steps down before anyone else may take over, so two leaders never write at once. Updates carry the
 * resourceVersion: of two candidates racing, one wins and the other gets 409.
 */
import { z } from 'zod';
import type { Logger } from '../lib/logger.js';
import { codeOf, resourcePath, type KubeApi } from '../lib/kube/api.js';
import { systemTimers, type Timers } from './work-queue.js';

export const LeaseSpecSchema = z.looseObject({
  holderIdentity: z.string().nullable().optional(),
  leaseDurationSeconds: z.number().int().nullable().optional(),
  acquireTime: z.string().nullable().optional(),
  renewTime: z.string().nullable().optional(),
  leaseTransitions: z.number().int().nullable().optional(),
});
export type LeaseSpec = z.infer<typeof LeaseSpecSchema>;
export interface LeaseRecord {
  spec: LeaseSpec;
  resourceVersion?: string;
}

/** Storage of the one Lease; create and update throw on conflict (e.g. code 409). */
export interface LeaseClient {
  get(): Promise<LeaseRecord | undefined>;
  create(spec: LeaseSpec): Promise<LeaseRecord>;
  update(spec: LeaseSpec, resourceVersion: string | undefined): Promise<LeaseRecord>;
}

export interface LeaderElectionOptions {
  client: LeaseClient;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  timers?: Timers;
  logger?: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

/** Kubernetes MicroTime: RFC 3339 with six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  private leader = false;
  private observed?: { key: string; at: number };
  private lastRenew = 0;
  private timer?: unknown;
  private stopped = false;
  private readonly leaseMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;
  private readonly timers: Timers;

  constructor(private readonly o: LeaderElectionOptions) {
    this.leaseMs = o.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = o.renewDeadlineMs ?? Math.round((this.leaseMs * 2) / 3);
    this.retryMs = o.retryPeriodMs ?? Math.max(100, Math.round(this.leaseMs / 7.5));
    if (this.renewDeadlineMs >= this.leaseMs) throw new Error('renew deadline must be shorter than the lease duration');
    this.timers = o.timers ?? systemTimers;
  }

  isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    this.stopped = false;
    void this.tick();
  }

  /** Stops; a leader releases the lease (empty holder) so a successor need not wait for expiry. */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    if (this.leader) {
      this.setLeader(false);
      if (release) {
        try {
          const cur = await this.o.client.get();
          if (cur?.spec.holderIdentity === this.o.identity) {
            const now = this.timers.now();
            await this.o.client.update(
              { ...cur.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(now) },
              cur.resourceVersion,
            );
          }
        } catch (e) {
          this.o.logger?.warn({ err: (e as Error).message }, 'could not release the lease');
        }
      }
    }
  }

  /** One round; exposed for tests. Returns whether this candidate holds the lease afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.timers.now();
    const me = this.o.identity;
    const fresh: LeaseSpec = {
      holderIdentity: me,
      leaseDurationSeconds: Math.max(1, Math.round(this.leaseMs / 1000)),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    const cur = await this.o.client.get();
    if (!cur) {
      await this.o.client.create(fresh);
      this.observed = { key: JSON.stringify(fresh), at: now };
      return true;
    }
    const key = JSON.stringify([
      cur.spec.holderIdentity,
      cur.spec.renewTime,
      cur.spec.acquireTime,
      cur.resourceVersion,
    ]);
    if (this.observed?.key !== key) this.observed = { key, at: now };
    const holder = cur.spec.holderIdentity ?? '';
    const duration = holder === me ? this.leaseMs : (cur.spec.leaseDurationSeconds ?? this.leaseMs / 1000) * 1000;
    if (holder !== '' && holder !== me && this.observed.at + duration > now) return false;
    const next: LeaseSpec =
      holder === me
        ? { ...cur.spec, renewTime: microTime(now), leaseDurationSeconds: fresh.leaseDurationSeconds }
        : { ...fresh, leaseTransitions: (cur.spec.leaseTransitions ?? 0) + 1 };
    const written = await this.o.client.update(next, cur.resourceVersion);
    this.observed = {
      key: JSON.stringify([
        written.spec.holderIdentity,
        written.spec.renewTime,
        written.spec.acquireTime,
        written.resourceVersion,
      ]),
      at: now,
    };
    return true;
  }

  private setLeader(v: boolean): void {
    if (v === this.leader) return;
    this.leader = v;
    this.o.logger?.info({ identity: this.o.identity }, v ? 'became the leader' : 'stopped leading');
    if (v) this.o.onStartedLeading();
    else this.o.onStoppedLeading();
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    let ok = false;
    try {
      ok = await this.tryAcquireOrRenew();
    } catch (e) {
      const c = codeOf(e);
      if (c !== 409 && c !== 422) this.o.logger?.warn({ err: (e as Error).message }, 'lease update failed');
    }
    if (this.stopped) return;
    const now = this.timers.now();
    if (ok) {
      this.lastRenew = now;
      this.setLeader(true);
    } else if (this.leader && now - this.lastRenew >= this.renewDeadlineMs) {
      this.setLeader(false);
    } else if (this.leader && !ok) {
      // a failed renew within the deadline: keep leading, try again soon
    }
    this.timer = this.timers.setTimeout(() => void this.tick(), this.retryMs);
  }
}

/** The Lease as a LeaseClient over the API server. */
export function kubeLeaseClient(api: KubeApi, namespace: string, name: string): LeaseClient {
  const ref = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases' };
  const LeaseObj = z.looseObject({
    metadata: z.looseObject({ resourceVersion: z.string().optional() }),
    spec: LeaseSpecSchema.optional(),
  });
  const toRecord = (raw: unknown): LeaseRecord => {
    const o = LeaseObj.parse(raw);
    return { spec: o.spec ?? {}, resourceVersion: o.metadata.resourceVersion };
  };
  return {
    async get() {
      try {
        return toRecord(await api.get(resourcePath(ref, namespace, name)));
      } catch (e) {
        if (codeOf(e) === 404) return undefined;
        throw e;
      }
    },
    async create(spec) {
      return toRecord(
        await api.post(resourcePath(ref, namespace), {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec,
        }),
      );
    },
    async update(spec, resourceVersion) {
      return toRecord(
        await api.put(resourcePath(ref, namespace, name), {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace, resourceVersion },
          spec,
        }),
      );
    },
  };
}
