/**
 * DRL peer registry: each gateway of a group heartbeats into a Redis sorted set every
 * `drl_notification_frequency` s; a peer silent for two periods is dead. N = live peers (≥ 1).
 * While the store is unreachable the last known N is kept; with no store N = 1.
 */
import { randomUUID } from 'node:crypto';
import type { Redis, Cluster } from 'ioredis';
import type { Clock } from '../../lib/clock.js';

export class DrlPeers {
  readonly id = randomUUID();
  private n = 1;
  private timer?: NodeJS.Timeout;
  private readonly listeners: ((n: number) => void)[] = [];

  constructor(
    private readonly redis: Redis | Cluster | undefined,
    private readonly group: string,
    private readonly periodSeconds: number,
    private readonly clock: Clock,
    private readonly onError: (e: Error) => void = () => {},
  ) {}

  get key(): string {
    return `gw:drl:{${this.group}}:peers`;
  }

  count(): number {
    return this.n;
  }

  onChange(l: (n: number) => void): void {
    this.listeners.push(l);
  }

  async start(): Promise<void> {
    if (!this.redis) return;
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.periodSeconds * 1000);
    this.timer.unref();
  }

  async beat(): Promise<void> {
    if (!this.redis) return;
    const now = this.clock.now();
    const dead = now - 2 * this.periodSeconds * 1000;
    try {
      const res = await this.redis
        .multi()
        .zadd(this.key, String(now), this.id)
        .zremrangebyscore(this.key, '-inf', String(dead))
        .zcard(this.key)
        .pexpire(this.key, Math.ceil(this.periodSeconds * 4000))
        .exec();
      const n = Math.max(1, Number(res?.[2]?.[1] ?? this.n));
      if (n !== this.n) {
        this.n = n;
        for (const l of this.listeners) l(n);
      }
    } catch (e) {
      this.onError(e as Error); // keep the last known N
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.redis?.zrem(this.key, this.id).catch(() => undefined);
  }
}
