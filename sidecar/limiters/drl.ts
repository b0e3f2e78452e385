/**
 * Distributed rate limiter (default): a local token bucket per limit with capacity and refill
 * rate / N per `per`, N = live gateways of the group (drl-peers.ts). Every gateway admits at least one
 * request per window (the share never drops below 1). No store access on the request path.
 * When N changes, a bucket's capacity follows at once (tokens above the new capacity are dropped).
 */
import type { Clock } from '../../lib/clock.js';
import { ExpiringMap } from '../../lib/store/memory.js';
import type { LimitSpec } from '../config/types.js';
import { result, type Limiter, type LimitResult } from './types.js';

/** The number of live gateways sharing a limit (≥ 1). */
export type PeerCount = () => number;

interface Bucket {
  tokens: number;
  at: number;
}

export class DrlLimiter implements Limiter {
  readonly name = 'drl';
  private readonly buckets: ExpiringMap<Bucket>;

  constructor(
    private readonly clock: Clock,
    private readonly peers: PeerCount,
  ) {
    this.buckets = new ExpiringMap(clock);
  }

  /** This gateway's share of a limit: rate / N, at least 1. */
  share(limit: LimitSpec): number {
    return Math.max(1, limit.rate / Math.max(1, this.peers()));
  }

  check(bucketKey: string, limit: LimitSpec): LimitResult {
    const now = this.clock.now();
    if (limit.rate <= 0) return result(false, 0, 0, now, now + Math.max(1, limit.per * 1000));
    const capacity = this.share(limit);
    const perMs = Math.max(1, limit.per * 1000);
    const refill = capacity / perMs; // tokens per ms
    const b = this.buckets.get(bucketKey, now) ?? { tokens: capacity, at: now };
    b.tokens = Math.min(capacity, b.tokens + (now - b.at) * refill);
    b.at = now;
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    // an idle bucket is full again after `per`: forgetting it then changes nothing
    this.buckets.set(bucketKey, b, now + perMs);
    const next = b.tokens >= 1 ? now : now + (1 - b.tokens) / refill;
    return result(allowed, Math.floor(capacity), b.tokens, now, next);
  }

  async reset(bucketKey: string): Promise<void> {
    this.buckets.delete(bucketKey);
  }
}
