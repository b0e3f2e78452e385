import { api, count, harness, rule, session } from './fixtures.js';

const KEY = 'a'.repeat(64);
const req = (a: ReturnType<typeof api>, s: ReturnType<typeof session>, path = '/', method = 'GET', keyHash = KEY) => ({
  api: a,
  method,
  path,
  keyHash,
  session: s,
});

describe('scopes (docs/contract.md#request-path)', () => {
  test('an API-level refusal consumes no key allowance and no quota', async () => {
    const h = harness();
    const limited = api('limited', { apiLimit: { rate: 2, per: 60 } });
    const open = api('open');
    const key = session({ rate: 5, per: 60, quota_max: 100, quota_renewal_rate: 3600 });
    expect(await h.fire(6, req(limited, key))).toEqual([
      'allow',
      'allow',
      'api_limited',
      'api_limited',
      'api_limited',
      'api_limited',
    ]);
    // the key has used 2 of its 5 (not 6)
    expect(await h.fire(4, req(open, key))).toEqual(['allow', 'allow', 'allow', 'key_limited']);
    expect(await h.engine.readQuota(KEY, key)).toMatchObject({ remaining: 95 });
  });

  test('the API-level limit aggregates every key', async () => {
    const h = harness();
    const a = api('a', { apiLimit: { rate: 3, per: 60 } });
    const kinds = [];
    for (let i = 0; i < 5; i++) kinds.push((await h.engine.check(req(a, session({}), '/', 'GET', `k${i}`))).kind);
    expect(kinds).toEqual(['allow', 'allow', 'allow', 'api_limited', 'api_limited']);
  });

  test('the first matching API-level per-endpoint rule replaces the API limit', async () => {
    const h = harness();
    const a = api('a', {
      apiLimit: { rate: 100, per: 60 },
      endpointRules: [rule('GET', '^/?slow$', 1, 60), rule('*', '^/?slow$', 50, 60), rule('GET', '^/?.*$', 2, 60)],
    });
    expect(await h.fire(2, req(a, session({}), '/slow'))).toEqual(['allow', 'api_limited']);
    expect(count(await h.fire(5, req(a, session({}), '/slow', 'POST')), 'allow')).toBe(5);
    expect(await h.fire(3, req(a, session({}), '/other'))).toEqual(['allow', 'allow', 'api_limited']);
  });

  test('the key-level global allowance is shared by every API (rate 15 per 60 over three APIs → 15)', async () => {
    const h = harness();
    const key = session({ rate: 15, per: 60 });
    const apis = [api('a'), api('b'), api('c')];
    const kinds = [];
    for (let i = 0; i < 30; i++) kinds.push((await h.engine.check(req(apis[i % 3]!, key))).kind);
    expect(count(kinds, 'allow')).toBe(15);
    expect(kinds.slice(15).every((k) => k === 'key_limited')).toBe(true);
  });

  test('per-API allowances are independent per API and per key', async () => {
    const h = harness();
    const rights = { a: { limit: { rate: 2, per: 60 } }, b: { limit: { rate: 3, per: 60 } } };
    const k1 = session({ rate: 100, per: 60, access_rights: rights });
    const k2 = session({ rate: 100, per: 60, access_rights: rights });
    expect(count(await h.fire(5, req(api('a'), k1)), 'allow')).toBe(2);
    expect(count(await h.fire(5, req(api('b'), k1)), 'allow')).toBe(3);
    expect(count(await h.fire(5, req(api('a'), k2, '/', 'GET', 'b'.repeat(64))), 'allow')).toBe(2);
  });

  test('per-endpoint limits; an endpoint without one inherits the per-API limit, then the global one', async () => {
    const h = harness();
    const key = session({
      rate: 4,
      per: 60,
      access_rights: {
        a: {
          limit: { rate: 2, per: 60 },
          endpoints: [{ path: '/users/{id}', methods: [{ name: 'GET', limit: { rate: 1, per: 60 } }] }],
        },
        b: {},
      },
    });
    expect(await h.fire(2, req(api('a'), key, '/users/42'))).toEqual(['allow', 'key_limited']);
    // the per-endpoint bucket is its own: the per-API allowance is untouched
    expect(await h.fire(3, req(api('a'), key, '/users/42', 'POST'))).toEqual(['allow', 'allow', 'key_limited']);
    expect(await h.fire(1, req(api('a'), key, '/other'))).toEqual(['key_limited']);
    // API b has no per-API limit: the global 4
    expect(count(await h.fire(6, req(api('b'), key)), 'allow')).toBe(4);
  });

  test('disabling the API-level limiter keeps key-level limits', async () => {
    const h = harness();
    const disabled = api('a'); // compiled from disable_rate_limit / 0-0: no apiLimit
    expect(await h.fire(3, req(disabled, session({ rate: 2, per: 60 })))).toEqual(['allow', 'allow', 'key_limited']);
  });

  test('a key limit with rate and per both 0 is disabled; keyless APIs get only the API scope', async () => {
    const h = harness();
    expect(count(await h.fire(50, req(api('a'), session({ rate: 0, per: 0 }))), 'allow')).toBe(50);
    const keyless = api('k', { keyless: true, apiLimit: { rate: 2, per: 60 } });
    expect(await h.fire(3, { api: keyless, method: 'GET', path: '/' })).toEqual(['allow', 'allow', 'api_limited']);
  });

  test('every refusal carries Retry-After ≥ 1 whole seconds', async () => {
    const h = harness();
    const a = api('a', { apiLimit: { rate: 1, per: 0.5 } });
    await h.engine.check(req(a, session({})));
    const v1 = await h.engine.check(req(a, session({})));
    const b = api('b');
    const key = session({ rate: 1, per: 60, quota_max: 1, quota_renewal_rate: 0 });
    await h.engine.check(req(b, key));
    const v2 = await h.engine.check(req(b, key));
    h.clock.advance(60_000);
    const v3 = await h.engine.check(req(b, key));
    expect([v1.kind, v2.kind, v3.kind]).toEqual(['api_limited', 'key_limited', 'quota_exceeded']);
    for (const v of [v1, v2, v3]) {
      const ra = v.kind === 'allow' ? 0 : (v.retryAfter ?? 0);
      expect(Number.isInteger(ra) && ra >= 1).toBe(true);
    }
  });
});

describe('X-RateLimit header numbers (docs/contract.md#responses)', () => {
  test('the checked limit; with both scopes, the one with fewer remaining, the key on a tie', async () => {
    const h = harness();
    const key = session({ rate: 3, per: 60 });
    const wide = api('wide', { apiLimit: { rate: 10, per: 60 } });
    const v = await h.engine.check(req(wide, key));
    expect(v.headers).toMatchObject({ limit: 3, remaining: 2 }); // key: 2 left < API: 9 left
    const narrow = api('narrow', { apiLimit: { rate: 2, per: 60 } });
    const w = await h.engine.check(req(narrow, key));
    expect(w.headers).toMatchObject({ limit: 3, remaining: 1 }); // API 1 left, key 1 left: a tie → the key
    const roomy = session({ rate: 10, per: 60 });
    const x = await h.engine.check(
      req(api('narrow2', { apiLimit: { rate: 2, per: 60 } }), roomy, '/', 'GET', 'd'.repeat(64)),
    );
    expect(x.headers).toMatchObject({ limit: 2, remaining: 1 }); // API 1 left < key 9 left
  });

  test('a refusal reports remaining 0 and the reset of the refusing limit', async () => {
    const h = harness();
    const a = api('a', { apiLimit: { rate: 1, per: 60 } });
    await h.engine.check(req(a, session({})));
    const v = await h.engine.check(req(a, session({})));
    expect(v.kind).toBe('api_limited');
    expect(v.headers).toEqual({ limit: 1, remaining: 0, reset: Math.ceil((h.clock.now() + 60_000) / 1000) });
  });

  test('quotas mode carries quota_max, quota_remaining, quota_renews; API-only answers carry none', async () => {
    const h = harness({ rate_limit_response_headers: 'quotas' });
    const key = session({ rate: 100, per: 60, quota_max: 10, quota_renewal_rate: 60 });
    const v = await h.engine.check(req(api('a', { apiLimit: { rate: 5, per: 60 } }), key));
    expect(v.headers).toEqual({ limit: 10, remaining: 9, reset: Math.ceil(h.clock.now() / 1000) + 60 });
  });
});
