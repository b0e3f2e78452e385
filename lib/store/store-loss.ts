/**
 * Notices that a Redis store lost its data (FLUSHALL, a restart without persistence, a failover to an empty
 * replica) for the parts of a process that keep records in it. One detector per client, whatever records its
 * subscribers keep; the keys it reads are given to it.
 *
 * Two signals, read in one background pass every `pollMs` (1 s) and on every reconnect (`ready`):
 *  - the epoch key: a random id the detector sets (SET NX) when it is missing. The detector remembers the id
 *    it saw; the key missing, or holding another id, means the store lost its data since (the first read only
 *    learns the id). Every subscriber is then called
 *    once, and for `holdMs` (3 s) a miss is not final (`holding`, `holdOver`): time for the other processes to
 *    notice within their own poll and write back what they hold. `check()` reads it at once (after a lookup
 *    found nothing: read after it, so a flush between the two cannot pass for a complete store).
 *  - restorer markers (optional): keys written by whoever restores the store in bulk (a controller), and
 *    `complete(value)` saying whether one says the store holds everything again. `restored()` reads them at
 *    once: true while one says complete, or when none was ever seen (nothing restores this store, so a miss
 *    is an answer); `waitRestored(ms)` is the one wait every held lookup shares.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../logger.js';
import { bounded, BACKGROUND_DEADLINE_MS } from './store-calls.js';

const { randomBytes } = process.getBuiltinModule('node:crypto');
const { setTimeout: delay } = process.getBuiltinModule('node:timers/promises');

/** How often a held wait reads the markers again (ms). */
const RESTORE_POLL_MS = 100;

export interface StoreLossMarkers {
  keys: string[];
  /** Whether a marker value says the store holds everything (undefined: the key is missing). */
  complete: (value: string | null) => boolean | undefined;
}

export interface StoreLossOptions {
  /** The key holding the store's epoch id. */
  epochKey: string;
  /** Keys of a restorer that rewrites the store after a loss. */
  markers?: StoreLossMarkers;
  /** How often both signals are read in the background (ms). */
  pollMs?: number;
  /** How long after a noticed loss a miss is not final (ms). */
  holdMs?: number;
}

export class StoreLossDetector {
  readonly holdMs: number;
  private readonly pollMs: number;
  private readonly epochKey: string;
  private readonly markers?: StoreLossMarkers;
  private readonly subscribers = new Set<() => void>();
  /** The epoch id this process last saw; undefined before the first read. */
  private epoch?: string;
  /** When this process noticed the store lost its data (ms; 0: never). */
  private lostAt = 0;
  /** A marker was read at least once: the store is managed by a restorer. */
  private markerSeen = false;
  private checking?: Promise<boolean>;
  private restoring?: Promise<boolean>;
  private timer?: NodeJS.Timeout;
  private readonly tick = (): void => {
    void this.check().catch(() => undefined);
    if (this.markers) void this.restored().catch(() => undefined);
  };

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly logger: Logger,
    o: StoreLossOptions,
  ) {
    this.epochKey = o.epochKey;
    if (o.markers) this.markers = o.markers;
    this.pollMs = o.pollMs ?? 1000;
    this.holdMs = o.holdMs ?? 3000;
  }

  /** Whether restorer markers are read (a miss may wait for the restorer). */
  get hasRestorer(): boolean {
    return this.markers !== undefined;
  }

  /** Starts the background reads (every pollMs and on every reconnect). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(this.tick, this.pollMs);
    this.timer.unref();
    this.redis.on('ready', this.tick);
    this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.redis.off('ready', this.tick);
  }

  /** `onLoss` is called once per noticed loss; the returned function unsubscribes. */
  subscribe(onLoss: () => void): () => void {
    this.subscribers.add(onLoss);
    return () => this.subscribers.delete(onLoss);
  }

  /** Within holdMs of a noticed loss: a missing record is not final. */
  holding(now = Date.now()): boolean {
    return this.lostAt > 0 && now - this.lostAt < this.holdMs;
  }

  /** Resolves once the hold window has passed. */
  async holdOver(): Promise<void> {
    const left = this.lostAt + this.holdMs - Date.now();
    if (left > 0) await delay(left);
  }

  /** Reads the epoch; true when the store lost its data since the last read (the subscribers are called). */
  check(): Promise<boolean> {
    this.checking ??= this.readEpoch().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async readEpoch(): Promise<boolean> {
    let id = await bounded(this.redis.get(this.epochKey), BACKGROUND_DEADLINE_MS);
    if (id !== null && id === this.epoch) return false;
    if (id === null) {
      await bounded(this.redis.set(this.epochKey, randomBytes(16).toString('base64url'), 'NX'), BACKGROUND_DEADLINE_MS);
      id = await bounded(this.redis.get(this.epochKey), BACKGROUND_DEADLINE_MS);
    }
    const first = this.epoch === undefined;
    this.epoch = id ?? undefined;
    // a first read learns the id (a missing key is set: a new store and one emptied before this process
    // started look alike, and this process holds nothing of either yet)
    if (first && id !== null) return false;
    this.lostAt = Date.now();
    this.logger.info({ holdMs: this.holdMs }, 'store lost its data (epoch key missing or changed)');
    for (const s of this.subscribers) {
      try {
        s();
      } catch (e) {
        this.logger.warn({ err: (e as Error).message }, 'store loss subscriber failed');
      }
    }
    return true;
  }

  /** Whether the restorer markers say the store holds everything (or no marker was ever seen). */
  async restored(): Promise<boolean> {
    return (await this.markerState()).complete;
  }

  /**
   * The markers' values as read now (`values`, to compare two reads: a restore that finished between them
   * changed them), and whether one says the store holds everything (or none was ever seen).
   */
  async markerState(): Promise<{ complete: boolean; values: string }> {
    if (!this.markers) return { complete: true, values: '' };
    const { keys, complete } = this.markers;
    const read = await Promise.all(keys.map((k) => this.redis.get(k)));
    const values = JSON.stringify(read);
    let any = false;
    for (const v of read) {
      const c = complete(v);
      if (c) {
        this.markerSeen = true;
        return { complete: true, values };
      }
      if (c === false) any = true;
    }
    if (any) this.markerSeen = true;
    return { complete: !this.markerSeen, values };
  }

  /** Resolves true once restored, false after `maxMs`; one read loop for every waiting lookup. */
  waitRestored(maxMs: number): Promise<boolean> {
    this.restoring ??= (async () => {
      const end = Date.now() + maxMs;
      try {
        while (Date.now() < end) {
          await delay(RESTORE_POLL_MS);
          if (await this.restored().catch(() => false)) return true;
        }
        return false;
      } finally {
        this.restoring = undefined;
      }
    })();
    return this.restoring;
  }
}
