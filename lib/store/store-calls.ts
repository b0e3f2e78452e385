/**
 * How a gateway makes store calls on the request path (limiters, quotas, session lookups): no call while
 * the connection is lost, a deadline for the others, every failure reported and answered by the
 * caller's fallback.
 */
import { DEFAULT_KV_DEADLINE_MS } from '../options.js';

type MaybePromise<T> = T | Promise<T>;

/** Default deadline of one store call on the request path: the gateway option's default. */
export const DEFAULT_STORE_DEADLINE_MS = DEFAULT_KV_DEADLINE_MS;

/** The store connection is lost: the call is not made (it would wait in a queue for a reconnection). */
export class StoreUnavailableError extends Error {
  constructor() {
    super('shared store connection lost');
    this.name = 'StoreUnavailableError';
  }
}

/** ioredis statuses of a connection that was lost and is not back: calls would queue until it is. */
const LOST = new Set(['reconnecting', 'close', 'end']);

/**
 * Whether store calls are worth making (ioredis' status, single node or cluster): not while the
 * connection is lost. While it is first being made, calls queue and leave as soon as it is up.
 */
export const storeReady = (client: { status: string }) => (): boolean => !LOST.has(client.status);

export class StoreDeadlineError extends Error {
  constructor(ms: number) {
    super(`shared store did not answer within ${ms} ms`);
    this.name = 'StoreDeadlineError';
  }
}

/**
 * Off the request path (session writes, heartbeats at start-up): how long a call may wait for a store
 * that accepts connections but never answers (or a TLS URL against a plain-text port) before it fails
 * with a StoreDeadlineError. Without it such a store would hold the gateway's start forever. (Not ioredis's
 * `commandTimeout`: that arms a timer for every command, request path included.)
 */
export const BACKGROUND_DEADLINE_MS = 5000;

/**
 * `call`, or a StoreDeadlineError after `ms` (a late answer is dropped). `onLate` / `onTime` tell the
 * caller which happened (StoreCalls passes pre-bound functions: one promise and one timer per call, no
 * closure, on the request path).
 */
export function bounded<T>(
  call: Promise<T>,
  ms = BACKGROUND_DEADLINE_MS,
  onLate?: () => void,
  onTime?: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onLate?.();
      reject(new StoreDeadlineError(ms));
    }, ms);
    call.then(
      (v) => {
        clearTimeout(timer);
        onTime?.();
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/** The deadline a store call gets after a call missed the full one, until the store answers again (ms). */
export const SUSPECT_DEADLINE_MS = 50;

/**
 * The policy of one gateway's store calls on the request path, in one place: no call while the
 * connection is lost (StoreUnavailableError at once: a queued call would wait for a reconnection), a
 * deadline for the others, and every failure reported (onError) and answered by the caller's fallback.
 *
 * The deadline is normally `fullMs` (kv_deadline_ms): a store that answers, even slowly under load, is
 * waited for, so counts stay exact. Once a call misses it, the store is suspect: the following calls
 * get SUSPECT_DEADLINE_MS (at most fullMs) until one is answered (in time or late). A store that hangs
 * (accepts, never answers) therefore holds one request for the full deadline and the rest for the short
 * one, instead of every request for a second per step.
 */
export class StoreCalls {
  private suspect = false;
  readonly shortMs: number;

  constructor(
    readonly fullMs: number,
    private readonly ready: () => boolean = () => true,
    private readonly onError: (e: Error) => void = () => {},
  ) {
    this.shortMs = Math.min(SUSPECT_DEADLINE_MS, fullMs);
  }

  /** `call()` under the policy; `fallback(error)` answers when it fails. A synchronous answer comes back as is. */
  guard<T>(call: () => MaybePromise<T>, fallback: (e: Error) => T): MaybePromise<T> {
    if (!this.ready()) return this.failed(new StoreUnavailableError(), fallback);
    let r: MaybePromise<T>;
    try {
      r = call();
    } catch (e) {
      return this.failed(e, fallback);
    }
    if (!(r instanceof Promise)) return r;
    return this.deadline(r).catch((e: unknown) => this.failed(e, fallback));
  }

  /** `p`, or a StoreDeadlineError after the current deadline (0 or Infinity = none). A late answer is dropped. */
  deadline<T>(p: Promise<T>): Promise<T> {
    const ms = this.suspect ? this.shortMs : this.fullMs;
    if (!(ms > 0) || ms === Infinity) return p;
    return bounded(p, ms, this.late, this.onTime);
  }

  private readonly late = (): void => {
    this.suspect = true;
  };

  private readonly onTime = (): void => {
    this.suspect = false;
  };

  private failed<T>(e: unknown, fallback: (e: Error) => T): T {
    const err = asError(e);
    this.onError(err);
    return fallback(err);
  }
}

export const asError = (e: unknown): Error => (e instanceof Error ? e : new Error(String(e)));

/** Redis refused a command on a key of another type: bad store content (written by hand, or by something else). */
export const isWrongType = (e: Error): boolean => e.message.startsWith('WRONGTYPE');
