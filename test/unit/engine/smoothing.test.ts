import { ManualClock } from '../../../lib/clock.js';
import { MemorySlidingLog } from '../../../limiters/sliding-log.js';
import { initialState, smoothingStep } from '../../../limiters/smoothing.js';
import type { SmoothingEvent } from '../../../limiters/types.js';
import type { SmoothingUnsupported } from '../../../sidecar/engine/engine.js';
import {
  api,
  config,
  CURVE_EVENTS,
  CURVE_LIMIT,
  driveCurve,
  editedSmoothedLimit,
  harness,
  session,
  T0,
} from './fixtures.js';

// threshold 5, step 5, trigger 0.5 (up above A − 2.5, down below A − 7.5), delay 10 s, rate 20
const s = { enabled: true, threshold: 5, step: 5, trigger: 0.5, delay: 10 };

describe('smoothing state machine', () => {
  test('starts at threshold and moves up by step when R > A − step·trigger, capped at rate', () => {
    let st = initialState(s, 20);
    expect(st.allowance).toBe(5);
    expect(smoothingStep(st, 2, s, 20, T0).event).toBeUndefined(); // 2 ≤ 2.5
    const up = smoothingStep(st, 3, s, 20, T0);
    expect(up.event).toBe('RateLimitSmoothingUp');
    expect(up.state.allowance).toBe(10);
    st = { allowance: 18, lastEvent: 0 };
    expect(smoothingStep(st, 18, s, 20, T0).state.allowance).toBe(20);
    expect(smoothingStep({ allowance: 20, lastEvent: 0 }, 50, s, 20, T0).event).toBeUndefined();
  });

  test('moves down by step when R < A − step·(1 + trigger), never below threshold', () => {
    const down = smoothingStep({ allowance: 15, lastEvent: 0 }, 7, s, 20, T0);
    expect(down.event).toBe('RateLimitSmoothingDown');
    expect(down.state.allowance).toBe(10);
    expect(smoothingStep({ allowance: 15, lastEvent: 0 }, 8, s, 20, T0).event).toBeUndefined(); // 8 ≥ 7.5: stays
    expect(smoothingStep({ allowance: 9, lastEvent: 0 }, 1, s, 20, T0).state.allowance).toBe(5); // 9 − 5 = 4 is below threshold
    expect(smoothingStep({ allowance: 5, lastEvent: 0 }, 0, s, 20, T0).event).toBeUndefined();
  });

  test('a stored allowance outside [threshold, rate] (the limit was edited) is brought within them first', () => {
    // rate lowered to 6 under a stored 12: 6, then the rule (R = 5: no event)
    expect(smoothingStep({ allowance: 12, lastEvent: 0 }, 5, s, 6, T0)).toEqual({
      state: { allowance: 6, lastEvent: 0 },
      from: 6,
    });
    // threshold raised to 8 over a stored 5: 8
    const raised = { ...s, threshold: 8 };
    expect(smoothingStep({ allowance: 5, lastEvent: 0 }, 5, raised, 20, T0).state.allowance).toBe(8);
    // an event reports the allowance it moved from, as brought within the bounds
    const down = smoothingStep({ allowance: 30, lastEvent: 0 }, 2, { ...s, threshold: 2 }, 10, T0); // 2 < 10 − 7.5
    expect([down.event, down.from, down.state.allowance]).toEqual(['RateLimitSmoothingDown', 10, 5]);
  });

  test('the hold-off delay must expire between events', () => {
    const st = { allowance: 10, lastEvent: T0 };
    expect(smoothingStep(st, 10, s, 20, T0 + 9_999).event).toBeUndefined();
    expect(smoothingStep(st, 10, s, 20, T0 + 10_000).event).toBe('RateLimitSmoothingUp');
    expect(smoothingStep(st, 0, s, 20, T0 + 9_999).event).toBeUndefined();
    expect(smoothingStep(st, 0, s, 20, T0 + 10_000).event).toBe('RateLimitSmoothingDown');
  });
});

describe('smoothing in the sliding log', () => {
  test('R > A refuses; the allowance rises with the rate and falls back step by step to threshold', async () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const log = new MemorySlidingLog(clock, (e) => events.push(e));
    const limit = { rate: 20, per: 60, smoothing: s };
    const rs = [];
    for (let i = 0; i < 12; i++) rs.push(await log.check('b', limit));
    // the 3rd request lifts A from 5 to 10; the hold-off keeps it there: 10 admitted, then 429
    expect(rs.filter((r) => r.allowed).length).toBe(10);
    expect(rs[10]!.allowed).toBe(false);
    expect(rs[10]!.limit).toBe(10);
    expect(events).toEqual([
      {
        event: 'RateLimitSmoothingUp',
        limiterKey: 'b',
        oldAllowance: 5,
        newAllowance: 10,
        time: new Date(T0).toISOString(),
      },
    ]);
    clock.advance(10_000); // hold-off over: R = 13 > 7.5 → 15, so this request passes
    const r = await log.check('b', limit);
    expect(r.allowed).toBe(true);
    expect(r.limit).toBe(15);
    expect(events.map((e) => e.newAllowance)).toEqual([10, 15]);
    // quiet: the window empties; each request after a hold-off steps the allowance down
    clock.advance(61_000);
    await log.check('b', limit); // R = 1 < 7.5 → 10
    clock.advance(61_000);
    await log.check('b', limit); // R = 1 < 2.5 → 5
    clock.advance(61_000);
    await log.check('b', limit); // at threshold: no event
    expect(events.map((e) => [e.event, e.oldAllowance, e.newAllowance])).toEqual([
      ['RateLimitSmoothingUp', 5, 10],
      ['RateLimitSmoothingUp', 10, 15],
      ['RateLimitSmoothingDown', 15, 10],
      ['RateLimitSmoothingDown', 10, 5],
    ]);
  });

  test('smoothing off (option or object) → the plain rate, no events', async () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const off = new MemorySlidingLog(clock, (e) => events.push(e), false);
    let ok = 0;
    for (let i = 0; i < 25; i++) if ((await off.check('b', { rate: 20, per: 60, smoothing: s })).allowed) ok++;
    expect(ok).toBe(20);
    const disabledObject = new MemorySlidingLog(clock, (e) => events.push(e));
    ok = 0;
    for (let i = 0; i < 25; i++)
      if ((await disabledObject.check('b', { rate: 20, per: 60, smoothing: { ...s, enabled: false } })).allowed) ok++;
    expect(ok).toBe(20);
    expect(events).toEqual([]);
  });

  test('after a long idle spell the allowance steps down with its events (its state used to expire after 10 windows: a silent drop to threshold)', () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const log = new MemorySlidingLog(clock, (e) => events.push(e));
    const limit = { rate: 20, per: 1, smoothing: s };
    for (let i = 0; i < 3; i++) log.check('idle', limit); // R = 3 > 2.5: up to 10
    expect(events.map((e) => [e.event, e.newAllowance])).toEqual([['RateLimitSmoothingUp', 10]]);
    clock.advance(60 * 60 * 1000); // an hour: 3,600 windows, 360 hold-offs
    expect(log.check('idle', limit).limit).toBe(5); // R = 1 < 10 − 7.5: one step down, announced
    expect(events.map((e) => [e.event, e.oldAllowance, e.newAllowance])).toEqual([
      ['RateLimitSmoothingUp', 5, 10],
      ['RateLimitSmoothingDown', 10, 5],
    ]);
  });

  test('through the engine: the event names the API and the limiter key, never the raw key', async () => {
    const h = harness({ enable_kv_rolling_limiter: true });
    const a = api('orders');
    const keyHash = 'f'.repeat(64);
    await h.fire(3, {
      api: a,
      method: 'GET',
      path: '/',
      keyHash,
      session: session({ rate: 20, per: 60, smoothing: s }),
    });
    expect(h.events).toHaveLength(1);
    expect(h.events[0]).toMatchObject({
      event: 'RateLimitSmoothingUp',
      api_id: 'orders',
      limiterKey: `k:h:${keyHash}`,
      oldAllowance: 5,
      newAllowance: 10,
    });
  });

  test('a limit a policy configured: the event names that policy (global and per-API), the key’s own limit names none', async () => {
    const cfg = config({
      other: { rate: 1, per: 60, meta_data: { rate_limit_pattern: '$gw_meta.org' } },
      smooth: {
        rate: 20,
        per: 60,
        smoothing: s,
        access_rights: { pets: { limit: { rate: 20, per: 60, smoothing: s } } },
      },
      slow: { rate: 10, per: 60, access_rights: { pets: { limit: { rate: 10, per: 60 } } } },
    });
    const h = harness({ enable_kv_rolling_limiter: true }, cfg);
    const keyed = session({ apply_policies: ['other', 'slow', 'smooth'], meta_data: { team: 'green' } });
    await h.fire(3, { api: api('orders'), method: 'GET', path: '/', keyHash: 'a'.repeat(64), session: keyed });
    await h.fire(3, { api: api('pets'), method: 'GET', path: '/', keyHash: 'a'.repeat(64), session: keyed });
    expect(h.events.map((e) => [e.api_id, e.policy])).toEqual([
      ['orders', 'smooth'], // the global limit: smooth's 20/60 beat other's 1/60 and slow's 10/60
      ['pets', 'smooth'], // the per-API limit of pets
    ]);
    const own = harness({ enable_kv_rolling_limiter: true });
    await own.fire(3, {
      api: api('orders'),
      method: 'GET',
      path: '/',
      keyHash: 'b'.repeat(64),
      session: session({ rate: 20, per: 60, smoothing: s }),
    });
    expect(own.events).toHaveLength(1);
    expect(own.events[0]!.policy).toBeUndefined();
  });

  test('a limiter that cannot smooth refuses the smoothing clearly (reported once per bucket), the plain rate applies', async () => {
    const refused: SmoothingUnsupported[] = [];
    const h = harness({ enable_fixed_window_rate_limiter: true }, undefined, {
      onSmoothingUnsupported: (e) => refused.push(e),
    });
    const kinds = await h.fire(25, {
      api: api('a'),
      method: 'GET',
      path: '/',
      keyHash: 'e'.repeat(64),
      session: session({ rate: 20, per: 60, smoothing: s }),
    });
    expect(kinds.filter((k) => k === 'allow').length).toBe(20);
    expect(h.events).toEqual([]);
    expect(refused).toEqual([
      {
        api_id: 'a',
        limiterKey: `k:h:${'e'.repeat(64)}`,
        algorithm: 'fixed_window',
        reason: expect.stringMatching(/fixed_window limiter cannot smooth/),
      },
    ]);
    // the DRL (a limit above drl_threshold) cannot smooth either; its sliding-log fallback can
    const drlRefused: SmoothingUnsupported[] = [];
    const d = harness({}, undefined, { onSmoothingUnsupported: (e) => drlRefused.push(e) });
    await d.fire(3, {
      api: api('fast'),
      method: 'GET',
      path: '/',
      keyHash: 'd'.repeat(64),
      session: session({ rate: 6000, per: 60, smoothing: s }),
    });
    expect(drlRefused.map((e) => e.algorithm)).toEqual(['drl']);
    await d.fire(3, {
      api: api('slow'),
      method: 'GET',
      path: '/',
      keyHash: 'c'.repeat(64),
      session: session({ rate: 20, per: 60, smoothing: s }),
    });
    expect(drlRefused).toHaveLength(1);
    expect(d.events.map((e) => e.event)).toEqual(['RateLimitSmoothingUp']);
  });
});

describe('smoothing: an edited limit (memory sliding log)', () => {
  test('a lowered rate caps the stored allowance at once; a raised threshold lifts it', async () => {
    const clock = new ManualClock(T0);
    const log = new MemorySlidingLog(clock);
    const got = await editedSmoothedLimit((limit) => log.check('edited', limit), clock);
    expect(got.lifted).toBe(12);
    expect(got.lowered.admitted).toBeLessThanOrEqual(6); // it admitted 10 (the stored 12 stepped down once)
    expect(got.lowered.maxLimit).toBeLessThanOrEqual(6);
    expect(got.raised).toBeGreaterThanOrEqual(10); // it admitted 4
  });
});

describe('smoothing: scripted request-rate curve', () => {
  test('memory sliding log: A climbs by steps to rate and back to threshold, with the hold-offs', async () => {
    const clock = new ManualClock(T0);
    const events: SmoothingEvent[] = [];
    const log = new MemorySlidingLog(clock, (e) => events.push(e));
    const got = await driveCurve(() => log.check('curve', CURVE_LIMIT), clock, events);
    expect(got.events).toEqual(CURVE_EVENTS);
    expect(Math.max(...got.allowance)).toBe(16);
    expect(got.allowance.at(-1)).toBe(4);
    for (let i = 1; i < got.events.length; i++)
      expect(got.events[i]![0] - got.events[i - 1]![0]).toBeGreaterThanOrEqual(3);
  });
});
