/**
 * The memory store of the limiters (standalone without --redis, and unit tests): a map whose entries
 * expire at a time of the injected clock. Expired entries read as absent and are swept as the map is
 * used, so idle buckets do not pile up.
 */
import type { Clock } from '../clock.js';

export class ExpiringMap<V> {
  private readonly map = new Map<string, { value: V; expires: number }>();
  private ops = 0;

  constructor(
    private readonly clock: Clock,
    private readonly sweepEvery = 10_000,
  ) {}

  /** `now`: the caller's clock reading, when it has one (saves a clock read on the hot path). */
  get(key: string, now?: number): V | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (e.expires <= (now ?? this.clock.now())) {
      this.map.delete(key);
      return undefined;
    }
    return e.value;
  }

  /** `expiresAt` in clock ms; Infinity keeps the entry until deleted. */
  set(key: string, value: V, expiresAt: number): void {
    // an existing entry is updated in place: no new entry object per write to a busy bucket
    const e = this.map.get(key);
    if (e !== undefined) {
      e.value = value;
      e.expires = expiresAt;
    } else {
      this.map.set(key, { value, expires: expiresAt });
    }
    if (++this.ops >= this.sweepEvery) this.sweep();
  }

  delete(key: string): void {
    this.map.delete(key);
  }

  /** The live entries with their expiry (a snapshot to persist). */
  entries(): [key: string, value: V, expires: number][] {
    const now = this.clock.now();
    const out: [string, V, number][] = [];
    for (const [k, e] of this.map) if (e.expires > now) out.push([k, e.value, e.expires]);
    return out;
  }

  clear(): void {
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }

  sweep(): void {
    this.ops = 0;
    const now = this.clock.now();
    for (const [k, e] of this.map) if (e.expires <= now) this.map.delete(k);
  }
}
