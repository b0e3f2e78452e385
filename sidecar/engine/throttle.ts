/**
 * Throttling (docs/contract.md#throttling): a request refused by the key-level limit waits throttle_interval seconds
 * and is checked again, up to throttle_retry_limit times. Waiting is a timer (no worker held); the
 * number of requests waiting at once is bounded, and a request over the bound is refused at once.
 * A request whose client leaves stops waiting at once (its slot is freed) and is never checked again,
 * and one whose key was revoked while it waited is not admitted (ThrottleWait).
 */
import type { MaybePromise } from '../../limiters/types.js';

const { setTimeout: delay } = process.getBuiltinModule('node:timers/promises');

export type Sleep = (ms: number) => Promise<void>;
export const realSleep: Sleep = (ms) => delay(ms);

/** What the proxy tells throttling about a waiting request (engine/types.ts CheckRequest). */
export interface ThrottleWait {
  /** Calls `wake` once the request's client has gone (at once when it already has). */
  onClientGone?(wake: () => void): void;
  /** After a wait: whether the request is still to be served (its client is there, its key still valid). */
  stillWanted?(): MaybePromise<boolean>;
}

export class Throttle {
  private waiting = 0;
  constructor(
    private readonly maxWaiting: number,
    private readonly sleep: Sleep = realSleep,
  ) {}

  get inFlight(): number {
    return this.waiting;
  }

  /**
   * Re-runs `check` after each interval until it passes or the retries are used up. Undefined: the
   * request was abandoned while it waited (ThrottleWait.stillWanted said no); it was not checked again.
   */
  async retry<T extends { allowed: boolean }>(
    first: T,
    intervalS: number,
    retries: number,
    check: () => MaybePromise<T>,
    wait?: ThrottleWait,
  ): Promise<T | undefined> {
    let r = first;
    let gone: Promise<void> | undefined;
    for (let i = 0; i < retries && !r.allowed; i++) {
      if (this.waiting >= this.maxWaiting) return r;
      if (wait?.onClientGone && !gone) gone = new Promise<void>((wake) => wait.onClientGone!(wake));
      this.waiting++;
      try {
        const slept = this.sleep(Math.max(0, intervalS) * 1000);
        await (gone ? Promise.race([slept, gone]) : slept);
      } finally {
        this.waiting--;
      }
      if (wait?.stillWanted && !(await wait.stillWanted())) return undefined;
      r = await check();
    }
    return r;
  }
}
