import { MAX_TIMER_MS, clearLongTimeout, setLongTimeout } from '../../lib/long-timeout.js';

/** A stand-in for setTimeout that records the delays asked for and runs the callbacks on demand. */
function recorder() {
  const asked: number[] = [];
  let next: (() => void) | undefined;
  const set = (fn: () => void, ms: number) => {
    asked.push(ms);
    next = fn;
    return setTimeout(() => undefined, 0);
  };
  const fire = () => {
    const f = next;
    next = undefined;
    f?.();
  };
  return { asked, set, fire };
}

describe('setLongTimeout', () => {
  test('a delay within the limit is one timer', () => {
    const r = recorder();
    let called = 0;
    setLongTimeout(() => called++, 1000, r.set);
    expect(r.asked).toEqual([1000]);
    r.fire();
    expect(called).toBe(1);
  });

  test('600h is a chain of timers, none above 2^31−1 ms, adding up to 600h; the callback runs only at the end', () => {
    const r = recorder();
    let called = 0;
    const ms = 600 * 3_600_000;
    setLongTimeout(() => called++, ms, r.set);
    while (called === 0 && r.asked.length < 10) {
      expect(called).toBe(0);
      r.fire();
    }
    expect(called).toBe(1);
    expect(Math.max(...r.asked)).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(r.asked.reduce((a, b) => a + b, 0)).toBe(ms);
    expect(r.asked).toHaveLength(2);
  });

  test('clearLongTimeout stops the chain (real timers)', async () => {
    let called = 0;
    const h = setLongTimeout(() => called++, 20);
    clearLongTimeout(h);
    await new Promise((res) => setTimeout(res, 50));
    expect(called).toBe(0);
  });
});
