/**
 * setTimeout for any delay. Node's timers take at most 2^31−1 ms (about 24.8 days): a longer delay prints
 * a TimeoutOverflowWarning and fires after 1 ms. A long delay is armed as a chain of maximal timers, so a
 * rate-limit window of a month waits a month. Callers re-check their own clock when it fires.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface LongTimeout {
  /** The timer armed now (the next link of the chain). */
  timer: ReturnType<typeof setTimeout> | undefined;
}

type SetTimer = (fn: () => void, ms: number) => ReturnType<typeof setTimeout>;

/** Calls `fn` after `ms` (negative or NaN: at once, as setTimeout does). `set` is injectable for tests. */
export function setLongTimeout(fn: () => void, ms: number, set: SetTimer = setTimeout): LongTimeout {
  const h: LongTimeout = { timer: undefined };
  const arm = (left: number): void => {
    h.timer = left > MAX_TIMER_MS ? set(() => arm(left - MAX_TIMER_MS), MAX_TIMER_MS) : set(fn, left);
  };
  arm(ms);
  return h;
}

export function clearLongTimeout(h: LongTimeout): void {
  clearTimeout(h.timer);
  h.timer = undefined;
}
