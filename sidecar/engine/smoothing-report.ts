/**
 * What the engine tells of smoothing (docs/limiter-engine.md, smoothing): each event with the API and the
 * policy of its bucket (the limiters know only the bucket), and, once per bucket, a limit whose limiter
 * cannot smooth (fixed window, or the DRL for a limit above drl_threshold), whose plain rate then applies.
 */
import type { LimitSpec } from '../../contract/config.js';
import { smoothingActive } from '../../limiters/smoothing.js';
import type { Limiters } from '../../limiters/select.js';
import type { Limiter, SmoothingEvent } from '../../limiters/types.js';
import type { SmoothingEventPayloadT } from '../../lib/events.js';

/** A smoothing event with its API and, when a policy configured the limit, that policy's name. */
export type EngineSmoothingEvent = SmoothingEvent & { api_id: string; policy?: string };

/** An event's fields as the log line and the controller's payload (lib/events.ts) spell them, in that order. */
export function smoothingEventFields(e: EngineSmoothingEvent): Omit<SmoothingEventPayloadT, 'namespace' | 'policy'> {
  return {
    event: e.event,
    api_id: e.api_id,
    limiter_key: e.limiterKey,
    old_allowance: e.oldAllowance,
    new_allowance: e.newAllowance,
    time: e.time,
  };
}

export interface SmoothingUnsupported {
  api_id: string;
  /** The limiter bucket (never a raw key). */
  limiterKey: string;
  algorithm: string;
  reason: string;
}

export interface SmoothingListeners {
  onSmoothingEvent?: (e: EngineSmoothingEvent) => void;
  onSmoothingAllowance?: (api_id: string, allowance: number) => void;
  onSmoothingUnsupported?: (e: SmoothingUnsupported) => void;
}

export class SmoothingReport {
  /** Smoothed buckets → their API and configuring policy (what an event names). */
  private readonly bucketApi = new Map<string, { api_id: string; policy?: string }>();
  private readonly reportedUnsupported = new Set<string>();

  constructor(
    private readonly on: SmoothingListeners,
    private readonly enabled: boolean,
  ) {}

  /** The limiters' smoothing listener. */
  readonly event = (e: SmoothingEvent, allowance: number): void => {
    const of = this.bucketApi.get(e.limiterKey);
    const api_id = of?.api_id ?? '';
    this.on.onSmoothingEvent?.({ ...e, api_id, ...(of?.policy !== undefined ? { policy: of.policy } : {}) });
    this.on.onSmoothingAllowance?.(api_id, allowance);
  };

  /** Before `limiter` checks `bucket`: a smoothed limit's API and policy noted, or its refusal reported once. */
  note(limiters: Limiters, limiter: Limiter, bucket: string, limit: LimitSpec, apiId: string, policy?: string): void {
    if (!limit.smoothing || !this.enabled || !smoothingActive(limit.smoothing)) return;
    if (limiters.canSmooth(limiter)) {
      const known = this.bucketApi.get(bucket);
      if (known === undefined || known.api_id !== apiId || known.policy !== policy) {
        if (this.bucketApi.size > 100_000) this.bucketApi.clear();
        this.bucketApi.set(bucket, { api_id: apiId, policy });
      }
    } else if (!this.reportedUnsupported.has(bucket)) {
      if (this.reportedUnsupported.size > 10_000) this.reportedUnsupported.clear();
      this.reportedUnsupported.add(bucket);
      this.on.onSmoothingUnsupported?.({
        api_id: apiId,
        limiterKey: bucket,
        algorithm: limiter.name,
        reason: `smoothing refused: the ${limiter.name} limiter cannot smooth (only the sliding window log and the sentinel variant can); the plain rate applies`,
      });
    }
  }
}
