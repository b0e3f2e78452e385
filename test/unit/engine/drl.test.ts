import { ManualClock } from '../../../lib/clock.js';
import { DrlLimiter } from '../../../limiters/drl.js';
import { createLimiters, usesDrl } from '../../../limiters/select.js';
import { options, T0 } from './fixtures.js';

async function admitted(
  l: DrlLimiter,
  bucket: string,
  limit: { rate: number; per: number },
  n: number,
): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) if ((await l.check(bucket, limit)).allowed) ok++;
  return ok;
}

describe('DRL token bucket', () => {
  test('one gateway: capacity rate, refill rate per per', async () => {
    const clock = new ManualClock(T0);
    const drl = new DrlLimiter(clock, () => 1);
    const limit = { rate: 10, per: 10 };
    expect(await admitted(drl, 'b', limit, 15)).toBe(10);
    const refused = await drl.check('b', limit);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfter).toBe(1);
    clock.advance(1_000);
    expect(await admitted(drl, 'b', limit, 3)).toBe(1);
    clock.advance(10_000);
    expect(await admitted(drl, 'b', limit, 15)).toBe(10);
  });

  test('the limit is split by the number of live gateways (100/min over 2 → 50 each)', async () => {
    const clock = new ManualClock(T0);
    const drl = new DrlLimiter(clock, () => 2);
    expect(await admitted(drl, 'b', { rate: 100, per: 60 }, 200)).toBe(50);
  });

  test('header numbers describe the configured limit, not the local share (40/2 over 2 gateways)', () => {
    const clock = new ManualClock(T0);
    const drl = new DrlLimiter(clock, () => 2);
    const limit = { rate: 40, per: 2 };
    const first = drl.check('b', limit);
    expect([first.limit, first.remaining]).toEqual([40, 38]); // 19 local tokens left × 2 gateways
    for (let i = 0; i < 18; i++) drl.check('b', limit);
    const last = drl.check('b', limit); // the 20th: the local share is spent
    expect([last.allowed, last.limit, last.remaining]).toEqual([true, 40, 0]);
    const refused = drl.check('b', limit);
    expect([refused.allowed, refused.limit, refused.remaining]).toEqual([false, 40, 0]);
    // a share with a fraction (14/2 over 3 gateways: 4.67 each): once the gateway cannot admit, it says 0,
    // not the leftover 0.67 token × 3 = 2
    const frac = new DrlLimiter(clock, () => 3);
    const mid = { rate: 14, per: 2 };
    const answers = Array.from({ length: 6 }, () => frac.check('f', mid));
    expect(answers.map((r) => r.allowed)).toEqual([true, true, true, true, false, false]);
    expect(answers.map((r) => r.remaining)).toEqual([9, 6, 3, 0, 0, 0]);
    // with one gateway the numbers are the bucket's own
    const solo = new DrlLimiter(clock, () => 1).check('s', limit);
    expect([solo.limit, solo.remaining]).toEqual([40, 39]);
  });

  test('every gateway admits at least one request per window', async () => {
    const clock = new ManualClock(T0);
    const drl = new DrlLimiter(clock, () => 4);
    const limit = { rate: 2, per: 60 };
    expect(await admitted(drl, 'b', limit, 5)).toBe(1);
    clock.advance(30_000);
    expect(await admitted(drl, 'b', limit, 5)).toBe(0);
    clock.advance(30_000);
    expect(await admitted(drl, 'b', limit, 5)).toBe(1);
  });

  test('a change of N changes the share at once', async () => {
    const clock = new ManualClock(T0);
    let n = 1;
    const drl = new DrlLimiter(clock, () => n);
    const limit = { rate: 30, per: 60 };
    expect(await admitted(drl, 'b', limit, 10)).toBe(10); // 20 tokens left of 30
    n = 3; // share 10: the bucket is capped at 10
    expect(await admitted(drl, 'b', limit, 20)).toBe(10);
  });
});

describe('drl_threshold switch', () => {
  test('spec example: drl_threshold 2 with 5 gateways → DRL above 10 req/s', () => {
    expect(usesDrl({ rate: 11, per: 1 }, 2, 5)).toBe(true);
    expect(usesDrl({ rate: 10, per: 1 }, 2, 5)).toBe(false);
    expect(usesDrl({ rate: 660, per: 60 }, 2, 5)).toBe(true);
    expect(usesDrl({ rate: 600, per: 60 }, 2, 5)).toBe(false);
  });

  test('the limiter is chosen per limit and re-evaluated when N changes', () => {
    let n = 5;
    const l = createLimiters({ options: options({ drl_threshold: 2 }), clock: new ManualClock(T0), peers: () => n });
    expect(l.algorithm).toBe('drl');
    expect(l.forLimit({ rate: 10, per: 1 }).name).toBe('sliding_log');
    expect(l.forLimit({ rate: 11, per: 1 }).name).toBe('drl');
    n = 4; // 10 req/s > 2 × 4
    expect(l.forLimit({ rate: 10, per: 1 }).name).toBe('drl');
    n = 6; // 11 req/s ≤ 2 × 6
    expect(l.forLimit({ rate: 11, per: 1 }).name).toBe('sliding_log');
  });

  test('an explicitly enabled store algorithm serves every limit', () => {
    const clock = new ManualClock(T0);
    const fast = { rate: 1000, per: 1 };
    expect(
      createLimiters({ options: options({ enable_fixed_window_rate_limiter: true }), clock, peers: () => 1 }).forLimit(
        fast,
      ).name,
    ).toBe('fixed_window');
    expect(
      createLimiters({ options: options({ enable_sentinel_rate_limiter: true }), clock, peers: () => 1 }).forLimit(fast)
        .name,
    ).toBe('sentinel');
    expect(
      createLimiters({ options: options({ enable_kv_rolling_limiter: true }), clock, peers: () => 1 }).forLimit(fast)
        .name,
    ).toBe('sliding_log');
  });
});
