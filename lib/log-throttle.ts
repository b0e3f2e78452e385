/**
 * A log line per event is too many while a dependency is down (every request fails the same way): the
 * first event of each period is logged, with the number of events since the last line; the others are
 * only counted (metrics still count every one).
 */
export function throttledLog<T>(
  periodMs: number,
  log: (event: T, suppressed: number) => void,
  now: () => number = Date.now,
): (event: T) => void {
  let last = -Infinity;
  let suppressed = 0;
  return (event) => {
    const t = now();
    if (t - last < periodMs) {
      suppressed++;
      return;
    }
    last = t;
    log(event, suppressed);
    suppressed = 0;
  };
}

/**
 * throttledLog per key (an API): one key's failures do not hide another's. At most `maxKeys` keys are
 * tracked; past it the table starts again (a burst over many keys then logs one line per key once more).
 */
export function keyedThrottledLog<T>(
  periodMs: number,
  keyOf: (event: T) => string,
  log: (event: T, suppressed: number) => void,
  now: () => number = Date.now,
  maxKeys = 1000,
): (event: T) => void {
  const byKey = new Map<string, (event: T) => void>();
  return (event) => {
    const k = keyOf(event);
    let one = byKey.get(k);
    if (one === undefined) {
      if (byKey.size >= maxKeys) byKey.clear();
      one = throttledLog(periodMs, log, now);
      byKey.set(k, one);
    }
    one(event);
  };
}

/** A warn line `msg` for an error, at most one a second, with `suppressed`: the errors left out since the last line. */
export function throttledWarn(logger: { warn(obj: object, msg: string): void }, msg: string): (e: Error) => void {
  return throttledLog<Error>(1000, (e, suppressed) =>
    logger.warn({ err: e.message, ...(suppressed ? { suppressed } : {}) }, msg),
  );
}
