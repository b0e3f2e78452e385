import { initialState, smoothingStep } from '../../../limiters/smoothing.js';
import type { SmoothingUnsupported } from '../../../sidecar/engine/engine.js';
import { api, config, harness, session, T0 } from './fixtures.js';

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

describe('smoothing through the engine', () => {
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
