/**
 * The DRL's fallback while the shared store is unreachable (docs/contract.md#drl-bounds: an even split over the last
 * known peers): a local token bucket per limit with capacity and refill rate / N per `per`, N = live
 * gateways of the group at the last heartbeat that reached the store (drl-peers.ts). Every gateway admits at
 * least one request per window (the share never drops below 1). No store access.
 * When N changes, a bucket's capacity follows at once (tokens above the new capacity are dropped).
 * Its header numbers describe the limit as configured, not this gateway's share (docs/contract.md#responses,
 * X-RateLimit-Limit = the effective rate): limit = rate, remaining = the whole local tokens × N (what the
 * group has left when traffic is balanced), at most rate; 0 on a refusal.
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import type { LimitSpec } from '../contract/config.js';
import { allowanceOf, result, type Limiter, type LimitResult } from './types.js';

/** The number of live gateways sharing a limit (≥ 1). */
export type PeerCount = () => number;

interface Bucket {
  tokens: number;
  at: number;
}

export class EvenSplitLimiter implements Limiter {
  readonly name = 'drl';
  private readonly buckets: ExpiringMap<Bucket>;

  constructor(
    private readonly clock: Clock,
    private readonly peers: PeerCount,
  ) {
    this.buckets = new ExpiringMap(clock);
  }

  check(bucketKey: string, limit: LimitSpec): LimitResult {
    const now = this.clock.now();
    if (limit.rate <= 0) return result(false, 0, 0, now, now + Math.max(1, limit.per * 1000));
    const n = Math.max(1, this.peers());
    const capacity = Math.max(1, limit.rate / n); // this gateway's share, at least 1
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
    const rate = allowanceOf(limit.rate);
    // whole local tokens only: a gateway left with a fraction of a token cannot admit, so it says 0 (not the
    // fraction × N, which told a refused client that requests remained)
    return result(allowed, rate, Math.min(rate, Math.floor(b.tokens) * n), now, next);
  }

  async reset(bucketKey: string): Promise<void> {
    this.buckets.delete(bucketKey);
  }

  forget(bucketKey: string): void {
    this.buckets.delete(bucketKey);
  }
}
