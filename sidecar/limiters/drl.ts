/**
 * Distributed rate limiter (default): a local token bucket per limit with capacity and refill
 * rate / N per `per`, N = live gateways of the group (drl-peers.ts). Every gateway admits at least one
 * request per window. No store access on the request path.
 */
import type { Clock } from '../../lib/clock.js';
import type { LimitSpec } from '../config/types.js';
import { result, type Limiter, type LimitResult } from './types.js';

interface Bucket {
  tokens: number;
  at: number;
  capacity: number;
}

export class DrlLimiter implements Limiter {
  readonly name = 'drl';
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly clock: Clock,
    private readonly peers: () => number,
  ) {}

  /** This gateway's share of a limit. */
  share(limit: LimitSpec): number {
    return Math.max(1, limit.rate / Math.max(1, this.peers()));
  }

  async check(bucketKey: string, limit: LimitSpec): Promise<LimitResult> {
    const now = this.clock.now();
    const capacity = this.share(limit);
    const perMs = Math.max(1, limit.per * 1000);
    let b = this.buckets.get(bucketKey);
    if (!b) {
      b = { tokens: capacity, at: now, capacity };
      this.buckets.set(bucketKey, b);
    } else {
      if (b.capacity !== capacity) {
        b.tokens = Math.min(b.tokens, capacity); // N changed: the share changes at once
        b.capacity = capacity;
      }
      b.tokens = Math.min(capacity, b.tokens + ((now - b.at) * capacity) / perMs);
      b.at = now;
    }
    const limitShown = Math.floor(capacity);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      const next = b.tokens >= 1 ? now : now + ((1 - b.tokens) * perMs) / capacity;
      return result(true, limitShown, b.tokens, now, next);
    }
    return result(false, limitShown, 0, now, now + ((1 - b.tokens) * perMs) / capacity);
  }

  async reset(bucketKey: string): Promise<void> {
    this.buckets.delete(bucketKey);
  }
}
