/**
 * The work queue (client-go's semantics): keys, not events. A key added while it waits is queued once;
 * a key added while it is being processed runs again after the current run (never two runs of one key
 * at a time); at most `concurrency` keys run at once; a failed run is retried after an exponential
 * backoff (base·2^(n−1), capped), and a success forgets the failures. Timers are injected for tests.
 * Two priorities: `live` (a watch event, a retry) runs before any `bulk` key (a full resync), so a change
 * made while a resync of tens of thousands of keys is under way waits for a free slot, not for the resync;
 * a bulk key added live is promoted; bulk keys never take the last eighth of the slots (4 of 32), so a live key
 * starts at once instead of waiting for a bulk run to end. Every operation is O(1) (the arrays keep stale
 * entries of promoted keys, skipped when taken).
 * Items are any value with a key (`keyOf`): the queue dedups and serialises by key and hands the
 * handler the item itself, so a typed work item (work-items.ts) is never parsed back out of its key.
 */
import { backoffDelay } from '../lib/backoff.js';

export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemTimers: Timers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

interface QueueOptions<T> {
  handler: (item: T) => Promise<void>;
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  timers?: Timers;
  /** Called with every failure (after the retry is scheduled) and its attempt number. */
  onError?: (key: string, err: unknown, attempt: number, retryInMs: number) => void;
}

/** `keyOf` names an item's key; a queue of strings may leave it out (the string is its own key). */
export type WorkQueueOptions<T> = QueueOptions<T> &
  ([T] extends [string] ? { keyOf?: (item: T) => string } : { keyOf: (item: T) => string });

export type Priority = 'live' | 'bulk';

/** A FIFO of keys over an array with a moving head (compacted as it goes). */
class Fifo {
  private items: string[] = [];
  private head = 0;
  push(k: string): void {
    this.items.push(k);
  }
  shift(): string | undefined {
    if (this.head >= this.items.length) return undefined;
    const k = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return k;
  }
  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

export class WorkQueue<T = string> {
  private readonly queues: Record<Priority, Fifo> = { live: new Fifo(), bulk: new Fifo() };
  /** Keys waiting, the priority they wait at and their item (a key running and added again waits here too). */
  private readonly dirty = new Map<string, { priority: Priority; item: T }>();
  /** Keys in a queue (dirty and not running): the depth. */
  private waiting = 0;
  private readonly processing = new Set<string>();
  /** Running keys taken from the bulk queue. */
  private readonly runningBulk = new Set<string>();
  /** At most this many bulk keys run at once (the rest of the slots are kept for live keys). */
  private readonly bulkSlots: number;
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; handle: unknown }>();
  private active = 0;
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private readonly concurrency: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timers: Timers;
  private readonly keyOf: (item: T) => string;

  constructor(private readonly opts: WorkQueueOptions<T>) {
    this.keyOf = opts.keyOf ?? ((item: T) => item as string);
    this.concurrency = Math.max(1, opts.concurrency ?? 8);
    this.bulkSlots = this.concurrency - Math.floor(this.concurrency / 8);
    this.baseDelayMs = opts.baseDelayMs ?? 100;
    this.maxDelayMs = opts.maxDelayMs ?? 60_000;
    this.timers = opts.timers ?? systemTimers;
  }

  start(): void {
    this.running = true;
    this.pump();
  }

  /** Stops taking keys; queued keys stay (a later start() processes them). */
  stop(): void {
    this.running = false;
    this.pump();
  }

  /** Forget everything queued or scheduled (e.g. when leadership is lost). */
  clear(): void {
    this.queues.live.clear();
    this.queues.bulk.clear();
    this.waiting = 0;
    this.dirty.clear();
    this.failures.clear();
    for (const d of this.delayed.values()) this.timers.clearTimeout(d.handle);
    this.delayed.clear();
  }

  /** Queues the item (once per key); `bulk` items wait behind every `live` one. */
  add(item: T, priority: Priority = 'live'): void {
    const key = this.keyOf(item);
    const was = this.dirty.get(key)?.priority;
    if (was === 'live' || was === priority) return;
    this.dirty.set(key, { priority, item });
    const running = this.processing.has(key);
    if (!running) this.queues[priority].push(key); // promoted: its bulk entry is skipped when taken
    if (was === undefined && !running) this.waiting++;
    this.pump();
  }

  /** Adds the item after `ms`; an earlier pending delayed add of the same key wins. */
  addAfter(item: T, ms: number): void {
    if (ms <= 0) return this.add(item);
    const key = this.keyOf(item);
    const at = this.timers.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.timers.clearTimeout(existing.handle);
    const handle = this.timers.setTimeout(() => {
      this.delayed.delete(key);
      this.add(item);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Keys waiting to run (not counting running or delayed ones). */
  depth(): number {
    return this.waiting;
  }

  /** Failures in a row of a key (0 after a success). */
  attempts(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Resolves when nothing is running and (while started) nothing is queued; delayed retries excluded. */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private isIdle(): boolean {
    return this.active === 0 && (this.depth() === 0 || !this.running);
  }

  /** The next waiting key, live first (bulk only while a bulk slot is free); promoted or taken entries skipped. */
  private take(): { key: string; item: T; bulk: boolean } | undefined {
    for (const p of ['live', 'bulk'] as const) {
      if (p === 'bulk' && this.runningBulk.size >= this.bulkSlots) break;
      for (let k = this.queues[p].shift(); k !== undefined; k = this.queues[p].shift()) {
        const d = this.dirty.get(k);
        if (d?.priority === p && !this.processing.has(k)) return { key: k, item: d.item, bulk: p === 'bulk' };
      }
    }
    return undefined;
  }

  private pump(): void {
    while (this.running && this.active < this.concurrency && this.waiting > 0) {
      const taken = this.take();
      if (taken === undefined) break;
      const { key, item } = taken;
      if (taken.bulk) this.runningBulk.add(key);
      this.waiting--;
      this.dirty.delete(key);
      this.processing.add(key);
      this.active++;
      void this.run(key, item);
    }
    if (this.isIdle() && this.idleWaiters.length) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const r of w) r();
    }
  }

  private async run(key: string, item: T): Promise<void> {
    try {
      await this.opts.handler(item);
      this.failures.delete(key);
    } catch (e) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const delay = backoffDelay(n, this.baseDelayMs, this.maxDelayMs);
      this.addAfter(item, delay);
      this.opts.onError?.(key, e, n, delay);
    } finally {
      this.processing.delete(key);
      this.runningBulk.delete(key);
      this.active--;
      const again = this.dirty.get(key);
      if (again !== undefined) {
        this.queues[again.priority].push(key);
        this.waiting++;
      }
      this.pump();
    }
  }
}
