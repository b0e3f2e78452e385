import { ManualClock } from '../../../lib/clock.js';
import { WithFailureMode } from '../../../sidecar/limiters/failure-mode.js';
import type { Limiter } from '../../../sidecar/limiters/types.js';
import { T0 } from './fixtures.js';

const broken: Limiter = {
  name: 'sliding_log',
  check: () => Promise.reject(new Error('connection refused')),
};

describe('kv_failure_mode', () => {
  test('open admits and reports the store error', async () => {
    const errors: Error[] = [];
    const l = new WithFailureMode(broken, 'open', new ManualClock(T0), (e) => errors.push(e));
    const r = await l.check('b', { rate: 5, per: 1 });
    expect(r.allowed).toBe(true);
    expect(errors.map((e) => e.message)).toEqual(['connection refused']);
  });

  test('closed refuses with Retry-After 1', async () => {
    const errors: Error[] = [];
    const l = new WithFailureMode(broken, 'closed', new ManualClock(T0), (e) => errors.push(e));
    const r = await l.check('b', { rate: 5, per: 1 });
    expect(r.allowed).toBe(false);
    expect(r.retryAfter).toBe(1);
    expect(errors).toHaveLength(1);
  });
});
