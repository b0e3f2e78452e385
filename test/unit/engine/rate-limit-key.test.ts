import { expandPattern, limiterIdentity } from '../../../contract/limits/rate-limit-key.js';
import { api, config, count, harness, session } from './fixtures.js';

describe('custom rate-limit keys', () => {
  test('$gw_meta.NAME expands; missing → empty; everything else, | included, is literal', () => {
    const meta = { org: 'acme', user: 'u1', n: 7 };
    expect(expandPattern('$gw_meta.org|$gw_meta.user', meta)).toBe('acme|u1');
    expect(expandPattern('$gw_meta.org|$gw_meta.missing', meta)).toBe('acme|');
    expect(expandPattern('tenant-$gw_meta.n', meta)).toBe('tenant-7');
    expect(expandPattern('$gw_meta.missing', meta)).toBe('');
    expect(limiterIdentity('h1', '$gw_meta.missing', meta)).toBe('h:h1');
    expect(limiterIdentity('h1', '$gw_meta.org', meta)).toBe('p:acme');
    expect(limiterIdentity('h1', undefined, meta)).toBe('h:h1');
    // inherited members are not metadata: missing, so each key falls back to itself
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(expandPattern(`$gw_meta.${name}`, meta)).toBe('');
      expect(limiterIdentity('h1', `$gw_meta.${name}`, meta)).toBe('h:h1');
    }
  });

  const policies = {
    shared: {
      rate: 3,
      per: 60,
      quota_max: 5,
      quota_renewal_rate: 3600,
      meta_data: { rate_limit_pattern: '$gw_meta.org|$gw_meta.team' },
    },
  };
  const a = api('a');

  test('keys with equal expansions share rate limits and quotas', async () => {
    const h = harness({}, config(policies));
    const k1 = session({ apply_policies: ['shared'], meta_data: { org: 'acme', team: 'x' } });
    const k2 = session({ apply_policies: ['shared'], meta_data: { org: 'acme', team: 'x' } });
    const k3 = session({ apply_policies: ['shared'], meta_data: { org: 'acme', team: 'y' } });
    expect(await h.fire(2, { api: a, method: 'GET', path: '/', keyHash: '1', session: k1 })).toEqual([
      'allow',
      'allow',
    ]);
    expect(await h.fire(2, { api: a, method: 'GET', path: '/', keyHash: '2', session: k2 })).toEqual([
      'allow',
      'key_limited',
    ]);
    expect(count(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash: '3', session: k3 }), 'allow')).toBe(3);
    // quota too: 3 used by acme|x; after the window, 2 more then quota_exceeded
    h.clock.advance(60_000);
    expect(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash: '2', session: k2 })).toEqual([
      'allow',
      'allow',
      'quota_exceeded',
    ]);
  });

  test('different expansions never share a bucket: `:` (the bucket separator) and `%` are escaped', async () => {
    expect(limiterIdentity('h1', '$gw_meta.org', { org: 'a:b%c' })).toBe('p:a%3Ab%25c');
    expect(limiterIdentity('h1', '$gw_meta.org', { org: 'a%3Ab' })).toBe('p:a%253Ab');
    // key X: pattern `$gw_meta.org` = "Z|t" with a per-API limit; key Y: "Z|t:a:a" with a global one.
    // Unescaped, Y's global bucket `k:p:Z|t:a:a` was X's per-API bucket on API a.
    const h = harness(
      {},
      config({
        perApi: {
          access_rights: { a: { api_id: 'a', limit: { rate: 2, per: 60 } } },
          meta_data: { rate_limit_pattern: '$gw_meta.org' },
        },
        global: { rate: 2, per: 60, meta_data: { rate_limit_pattern: '$gw_meta.org' } },
      }),
    );
    const x = session({ apply_policies: ['perApi'], meta_data: { org: 'Z|t' } });
    const y = session({ apply_policies: ['global'], meta_data: { org: 'Z|t:a:a' } });
    expect(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash: 'x', session: x })).toEqual([
      'allow',
      'allow',
      'key_limited',
    ]);
    expect(await h.fire(2, { api: a, method: 'GET', path: '/', keyHash: 'y', session: y })).toEqual(['allow', 'allow']);
  });

  test('an empty expansion falls back to the key', async () => {
    const h = harness({}, config({ p: { rate: 2, per: 60, meta_data: { rate_limit_pattern: '$gw_meta.org' } } }));
    const k1 = session({ apply_policies: ['p'] });
    const k2 = session({ apply_policies: ['p'] });
    expect(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash: '1', session: k1 })).toEqual([
      'allow',
      'allow',
      'key_limited',
    ]);
    expect(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash: '2', session: k2 })).toEqual([
      'allow',
      'allow',
      'key_limited',
    ]);
  });
});
