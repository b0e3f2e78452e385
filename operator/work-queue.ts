/**
 * The work queue (client-go's semantics): keys, not events. A key added while it waits is queued once;
 * a key added while it is being processed runs again after the current run (never two runs of one key
 * at a time); at most `concurrency` keys run at once; a failed run is retried after an exponential
 * backoff (base·2^(n−1), capped), and a success forgets the failures. Timers are injected for tests.
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

export interface WorkQueueOptions {
  handler: (key: string) => Promise<void>;
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  timers?: Timers;
  /** Called with every failure (after the retry is scheduled) and its attempt number. */
  onError?: (key: string, err: unknown, attempt: number, retryInMs: number) => void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private head = 0;
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; handle: unknown }>();
  private active = 0;
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private readonly concurrency: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timers: Timers;

  constructor(private readonly opts: WorkQueueOptions) {
    this.concurrency = Math.max(1, opts.concurrency ?? 8);
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
    this.queue.length = 0;
    this.head = 0;
    this.dirty.clear();
    this.failures.clear();
    for (const d of this.delayed.values()) this.timers.clearTimeout(d.handle);
    this.delayed.clear();
  }

  add(key: string): void {
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    if (!this.processing.has(key)) this.queue.push(key);
    this.pump();
  }

  /** Adds the key after `ms`; an earlier pending delayed add of the same key wins. */
  addAfter(key: string, ms: number): void {
    if (ms <= 0) return this.add(key);
    const at = this.timers.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.timers.clearTimeout(existing.handle);
    const handle = this.timers.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Keys waiting to run (not counting running or delayed ones). */
  depth(): number {
    return this.queue.length - this.head;
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

  private take(): string | undefined {
    const key = this.queue[this.head++];
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    return key;
  }

  private pump(): void {
    while (this.running && this.active < this.concurrency && this.depth() > 0) {
      const key = this.take()!;
      this.dirty.delete(key);
      this.processing.add(key);
      this.active++;
      void this.run(key);
    }
    if (this.isIdle() && this.idleWaiters.length) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const r of w) r();
    }
  }

  private async run(key: string): Promise<void> {
    try {
      await this.opts.handler(key);
      this.failures.delete(key);
    } catch (e) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const delay = backoffDelay(n, this.baseDelayMs, this.maxDelayMs);
      this.addAfter(key, delay);
      this.opts.onError?.(key, e, n, delay);
    } finally {
      this.processing.delete(key);
      this.active--;
      if (this.dirty.has(key)) this.queue.push(key);
      this.pump();
    }
  }
}
