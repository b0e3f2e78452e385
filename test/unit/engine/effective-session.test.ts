import type { PolicySpecT } from '../../../crds/schemas/policy.js';
import { effectiveSession, type EffectiveSession } from '../../../contract/limits/effective-session.js';
import { config, session } from './fixtures.js';

const sm = (threshold: number) => ({ enabled: true, threshold, step: 1, trigger: 0.5, delay: 1 });

function eff(policies: Record<string, Partial<PolicySpecT>>, names: string[], extra = {}): EffectiveSession {
  const r = effectiveSession(session({ apply_policies: names, ...extra }), config(policies));
  if (r instanceof Error) throw r;
  return r;
}

describe('several policies on one key', () => {
  test('90/30 + 100/10 → 100/10, in either order (not the pre-5.4.0 highest rate + highest per = 100/30)', () => {
    const ps = { slow: { rate: 90, per: 30, smoothing: sm(1) }, fast: { rate: 100, per: 10, smoothing: sm(2) } };
    for (const order of [
      ['slow', 'fast'],
      ['fast', 'slow'],
    ]) {
      const e = eff(ps, order);
      expect([e.rate, e.per]).toEqual([100, 10]);
      expect([e.rate, e.per]).not.toEqual([100, 30]);
      expect(e.smoothing).toEqual(sm(2)); // taken together with its rate and per
    }
  });

  test("a 0/0 policy sets no rate: it does not lift the other policies' limit (global, per-API, per-endpoint), as in Tyk", () => {
    const zero = {
      rate: 0,
      per: 0,
      quota_max: 1000,
      access_rights: {
        x: {
          limit: { rate: 0, per: 0 },
          endpoints: [{ path: '/u', methods: [{ name: 'GET', limit: { rate: 0, per: 0 } }] }],
        },
      },
    };
    const two = {
      rate: 2,
      per: 60,
      access_rights: {
        x: {
          limit: { rate: 2, per: 60 },
          endpoints: [{ path: '/u', methods: [{ name: 'GET', limit: { rate: 1, per: 60 } }] }],
        },
      },
    };
    for (const order of [
      ['zero', 'two'],
      ['two', 'zero'],
    ]) {
      const e = eff({ zero, two }, order);
      expect([e.rate, e.per]).toEqual([2, 60]);
      expect(e.access_rights.x!.limit).toMatchObject({ rate: 2, per: 60 });
      expect(e.access_rights.x!.endpoints).toEqual([
        { path: '/u', methods: [{ name: 'GET', limit: { rate: 1, per: 60 } }] },
      ]);
      expect(e.quota_max).toBe(1000);
    }
    // only 0/0 policies: no limit at all (the endpoint rule stays, disabled)
    const alone = eff({ zero }, ['zero']);
    expect(alone.rate).toBeUndefined();
    expect(alone.access_rights.x!.endpoints![0]!.methods[0]!.limit).toEqual({ rate: 0, per: 0 });
  });

  test('a tie keeps the earlier policy', () => {
    const e = eff({ a: { rate: 10, per: 10, smoothing: sm(1) }, b: { rate: 20, per: 20, smoothing: sm(2) } }, [
      'a',
      'b',
    ]);
    expect([e.rate, e.per, e.smoothing]).toEqual([10, 10, sm(1)]);
    const f = eff({ a: { rate: 10, per: 10, smoothing: sm(1) }, b: { rate: 20, per: 20, smoothing: sm(2) } }, [
      'b',
      'a',
    ]);
    expect([f.rate, f.per, f.smoothing]).toEqual([20, 20, sm(2)]);
  });

  test('quota: highest quota_max (≤ 0 unlimited wins) and highest renewal; throttle: highest values', () => {
    const e = eff(
      {
        a: { quota_max: 100, quota_renewal_rate: 60, throttle_interval: 1, throttle_retry_limit: 5 },
        b: { quota_max: 500, quota_renewal_rate: 30, throttle_interval: 3, throttle_retry_limit: 2 },
      },
      ['a', 'b'],
    );
    expect([e.quota_max, e.quota_renewal_rate, e.throttle_interval, e.throttle_retry_limit]).toEqual([500, 60, 3, 5]);
    expect(eff({ a: { quota_max: 100 }, b: { quota_max: -1 } }, ['a', 'b']).quota_max).toBeLessThanOrEqual(0);
    expect(eff({ a: { quota_max: 0 }, b: { quota_max: 7 } }, ['a', 'b']).quota_max).toBeLessThanOrEqual(0);
  });

  test('access rights: the union; per-API and per-endpoint limits by highest rate/per', () => {
    const e = eff(
      {
        a: {
          access_rights: {
            x: {
              limit: { rate: 90, per: 30 },
              endpoints: [
                {
                  path: '/u/{id}',
                  methods: [
                    { name: 'GET', limit: { rate: 1, per: 1 } },
                    { name: 'POST', limit: { rate: 50, per: 10 } },
                  ],
                },
              ],
            },
            y: {},
          },
        },
        b: {
          access_rights: {
            x: {
              limit: { rate: 100, per: 10 },
              endpoints: [
                {
                  path: '/u/{id}',
                  methods: [
                    { name: 'GET', limit: { rate: 30, per: 10 } },
                    { name: 'POST', limit: { rate: 60, per: 60 } },
                  ],
                },
              ],
            },
            z: {},
          },
        },
      },
      ['a', 'b'],
    );
    expect(Object.keys(e.access_rights).sort()).toEqual(['x', 'y', 'z']);
    expect(e.access_rights.x!.limit).toMatchObject({ rate: 100, per: 10 });
    const methods = e.access_rights.x!.endpoints!.flatMap((ep) =>
      ep.methods.map((m) => [ep.path, m.name, m.limit.rate, m.limit.per]),
    );
    expect(methods.sort()).toEqual([
      ['/u/{id}', 'GET', 30, 10],
      ['/u/{id}', 'POST', 50, 10],
    ]);
  });

  test('allowed_urls: a policy without restrictions keeps the union unrestricted', () => {
    const e = eff(
      {
        a: { access_rights: { x: { allowed_urls: [{ url: '/only', methods: ['GET'] }] } } },
        b: { access_rights: { x: {} } },
      },
      ['a', 'b'],
    );
    expect(e.access_rights.x!.allowed_urls).toEqual([]);
    const f = eff(
      {
        a: { access_rights: { x: { allowed_urls: [{ url: '/one', methods: ['GET'] }] } } },
        b: { access_rights: { x: { allowed_urls: [{ url: '/two', methods: ['POST'] }] } } },
      },
      ['a', 'b'],
    );
    expect(f.access_rights.x!.allowed_urls).toEqual([
      { url: '/one', methods: ['GET'] },
      { url: '/two', methods: ['POST'] },
    ]);
  });

  test('policies set the limits (the key’s own rate is ignored); meta_data merges, the key wins', () => {
    const e = eff({ a: { rate: 5, per: 1, meta_data: { tier: 'gold', org: 'p' } } }, ['a'], {
      rate: 1000,
      per: 1,
      meta_data: { org: 'key' },
    });
    expect([e.rate, e.per]).toEqual([5, 1]);
    expect(e.meta_data).toEqual({ tier: 'gold', org: 'key' });
  });

  test('deprecated apply_policy_id applies one policy', () => {
    const r = effectiveSession(session({ apply_policy_id: 'a' }), config({ a: { rate: 3, per: 7 } }));
    expect(r instanceof Error ? r : [r.rate, r.per]).toEqual([3, 7]);
  });

  test('a missing or inactive policy fails closed with an error naming it', () => {
    const missing = effectiveSession(session({ apply_policies: ['a', 'nope'] }), config({ a: { rate: 1, per: 1 } }));
    expect(missing).toBeInstanceOf(Error);
    expect((missing as Error).message).toContain('default/nope');
    const inactive = effectiveSession(
      session({ apply_policies: ['a'] }),
      config({ a: { rate: 1, per: 1, active: false } }),
    );
    expect(inactive).toBeInstanceOf(Error);
  });

  test('without policies the key’s own fields are used', () => {
    const r = effectiveSession(session({ rate: 4, per: 2, quota_max: 9 }), config());
    expect(r instanceof Error ? r : [r.rate, r.per, r.quota_max]).toEqual([4, 2, 9]);
  });
});
