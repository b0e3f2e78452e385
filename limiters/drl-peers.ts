/**
 * DRL peer registry: each gateway of a group heartbeats into a Redis sorted set (score = clock ms)
 * every `drl_notification_frequency` s; a peer silent for two periods is dead and trimmed.
 * N = live peers (≥ 1), refreshed on every own heartbeat. While the store is unreachable the last known
 * N is kept; with no store N = 1.
 */
import type { Clock } from '../lib/clock.js';
import { storeKeys } from '../contract/store-keys.js';
import type { StoreClient } from '../lib/store/redis.js';
import { bounded } from '../lib/store/store-calls.js';
const { randomUUID } = process.getBuiltinModule('node:crypto');

export class DrlPeers {
  readonly id = randomUUID();
  private n = 1;
  private timer?: NodeJS.Timeout;
  private readonly listeners: ((n: number) => void)[] = [];

  constructor(
    private readonly redis: StoreClient | undefined,
    private readonly group: string,
    private readonly periodSeconds: number,
    private readonly clock: Clock,
    private readonly onError: (e: Error) => void = () => {},
  ) {}

  get key(): string {
    return storeKeys.peers(this.group);
  }

  /** Live gateways of the group, this one included (≥ 1). */
  count(): number {
    return this.n;
  }

  onChange(l: (n: number) => void): void {
    this.listeners.push(l);
  }

  async start(): Promise<void> {
    if (!this.redis || this.timer) return;
    // the first beat sets N before traffic; a store still connecting gets a second, one that never
    // answers does not hold the start (the beat goes on in the background, bounded)
    const first = this.beat();
    await (this.redis.status === 'ready' ? first : bounded(first, 1000).catch(() => undefined));
    this.timer = setInterval(() => void this.beat(), this.periodSeconds * 1000);
    this.timer.unref();
  }

  /** One heartbeat: register, trim peers silent for two periods, count. */
  async beat(): Promise<void> {
    if (!this.redis) return;
    const now = this.clock.now();
    const periodMs = this.periodSeconds * 1000;
    try {
      // bounded: a store that never answers must not hold the start (the first beat is awaited)
      const res = await bounded(
        this.redis
          .multi()
          .zadd(this.key, now, this.id)
          .zremrangebyscore(this.key, '-inf', now - 2 * periodMs)
          .zcard(this.key)
          .pexpire(this.key, Math.ceil(periodMs * 4))
          .exec(),
      );
      if (!res) throw new Error('transaction aborted');
      for (const [err] of res) if (err) throw err;
      this.set(Math.max(1, Number(res[2]![1])));
    } catch (e) {
      this.onError(e instanceof Error ? e : new Error(String(e))); // keep the last known N
    }
  }

  private set(n: number): void {
    if (n === this.n) return;
    this.n = n;
    for (const l of this.listeners) l(n);
  }

  /** Stop heartbeating; `deregister` (default) removes this peer at once instead of letting it time out. */
  async stop(deregister = true): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (deregister && this.redis) await bounded(this.redis.zrem(this.key, this.id)).catch(() => undefined);
  }
}
