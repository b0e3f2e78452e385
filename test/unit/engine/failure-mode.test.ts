import { ManualClock } from '../../../lib/clock.js';
import { StoreCalls, StoreDeadlineError, SUSPECT_DEADLINE_MS } from '../../../lib/store/store-calls.js';
import { WithFailureMode } from '../../../limiters/failure-mode.js';
import type { Limiter } from '../../../limiters/types.js';
import { T0 } from './fixtures.js';

const broken: Limiter = {
  name: 'sliding_log',
  check: () => Promise.reject(new Error('connection refused')),
  forget: () => {},
};

describe('kv_failure_mode', () => {
  test('open admits and reports the store error', async () => {
    const errors: Error[] = [];
    const l = new WithFailureMode(
      broken,
      'open',
      new ManualClock(T0),
      new StoreCalls(0, undefined, (e) => errors.push(e)),
    );
    const r = await l.check('b', { rate: 5, per: 1 });
    expect(r.allowed).toBe(true);
    expect(errors.map((e) => e.message)).toEqual(['connection refused']);
  });

  test('closed refuses with Retry-After 1, marked unavailable', async () => {
    const errors: Error[] = [];
    const l = new WithFailureMode(
      broken,
      'closed',
      new ManualClock(T0),
      new StoreCalls(0, undefined, (e) => errors.push(e)),
    );
    const r = await l.check('b', { rate: 5, per: 1 });
    expect(r.allowed).toBe(false);
    expect(r.retryAfter).toBe(1);
    expect(r.unavailable).toBe(true); // the gateway answers 503, not the 429 of a real limit
    expect(errors).toHaveLength(1);
  });
});

describe('store deadline', () => {
  const never = (): Promise<never> => new Promise<never>(() => {});
  const timed = async (p: Promise<unknown>): Promise<{ ms: number; error?: unknown }> => {
    const t = performance.now();
    try {
      await p;
      return { ms: performance.now() - t };
    } catch (error) {
      return { ms: performance.now() - t, error };
    }
  };

  test('full deadline until a call misses it; then the short one until the store answers again', async () => {
    const d = new StoreCalls(400);
    expect(d.shortMs).toBe(SUSPECT_DEADLINE_MS);
    const first = await timed(d.deadline(never()));
    expect(first.error).toBeInstanceOf(StoreDeadlineError);
    expect(first.ms).toBeGreaterThanOrEqual(390);
    const second = await timed(d.deadline(never())); // suspect: the short deadline
    expect(second.error).toBeInstanceOf(StoreDeadlineError);
    expect(second.ms).toBeLessThan(300);
    expect(await d.deadline(Promise.resolve('ok'))).toBe('ok'); // the store answered
    const third = await timed(d.deadline(never())); // the full deadline again
    expect(third.ms).toBeGreaterThanOrEqual(390);
  });

  test('a deadline below the short one is kept; 0 means none', async () => {
    expect(new StoreCalls(20).shortMs).toBe(20);
    const p = Promise.resolve(1);
    expect(new StoreCalls(0).deadline(p)).toBe(p);
  });
});
