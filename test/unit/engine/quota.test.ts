import { ManualClock } from '../../../lib/clock.js';
import { MemoryQuota } from '../../../limiters/quota.js';
import { NEVER_RETRY_AFTER } from '../../../sidecar/engine/engine.js';
import { api, config, count, harness, session, T0 } from './fixtures.js';

describe('quotas (memory)', () => {
  test('exactly quota_max per renewal period; remaining and renews kept current', async () => {
    const clock = new ManualClock(T0);
    const q = new MemoryQuota(clock);
    const spec = { max: 3, renewal: 3600 };
    expect(await q.read('b', spec)).toEqual({ remaining: 3, renews: 0 });
    const rs = [];
    for (let i = 0; i < 5; i++) rs.push(await q.consume('b', spec));
    expect(rs.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
    expect(rs.map((r) => r.remaining)).toEqual([2, 1, 0, 0, 0]);
    expect(rs[0]!.renews).toBe(T0 / 1000 + 3600);
    expect(await q.read('b', spec)).toEqual({ remaining: 0, renews: T0 / 1000 + 3600 });
    clock.set(T0 + 3_599_999);
    expect((await q.consume('b', spec)).allowed).toBe(false);
    clock.set(T0 + 3_600_000);
    const renewed = await q.consume('b', spec);
    expect(renewed).toEqual({
      allowed: true,
      max: 3,
      remaining: 2,
      renews: T0 / 1000 + 7200,
      renewsMs: T0 + 7_200_000,
    });
  });

  test('quota_renewal_rate ≤ 0 never renews', async () => {
    const clock = new ManualClock(T0);
    const q = new MemoryQuota(clock);
    const spec = { max: 2, renewal: 0 };
    await q.consume('b', spec);
    await q.consume('b', spec);
    clock.advance(10 * 365 * 86_400_000);
    const r = await q.consume('b', spec);
    expect(r.allowed).toBe(false);
    expect(r.renews).toBe(0);
  });

  test('reset puts the counter back to full', async () => {
    const q = new MemoryQuota(new ManualClock(T0));
    const spec = { max: 1, renewal: 60 };
    await q.consume('b', spec);
    expect((await q.consume('b', spec)).allowed).toBe(false);
    await q.reset('b');
    expect((await q.consume('b', spec)).allowed).toBe(true);
  });
});

describe('quotas in the engine', () => {
  const a = api('a');
  const keyHash = '1'.repeat(64);

  test('quota_max ≤ 0 is unlimited', async () => {
    const h = harness();
    for (const max of [0, -1]) {
      const kinds = await h.fire(50, {
        api: a,
        method: 'GET',
        path: '/',
        keyHash: `${max}`,
        session: session({ quota_max: max, quota_renewal_rate: 60 }),
      });
      expect(count(kinds, 'allow')).toBe(50);
    }
  });

  test('over quota → quota_exceeded with Retry-After until renewal; readQuota and resetQuota', async () => {
    const h = harness({ rate_limit_response_headers: 'quotas' });
    const stored = session({ quota_max: 3, quota_renewal_rate: 100 });
    const v = [];
    for (let i = 0; i < 4; i++)
      v.push(await h.engine.check({ api: a, method: 'GET', path: '/', keyHash, session: stored }));
    expect(v.map((x) => x.kind)).toEqual(['allow', 'allow', 'allow', 'quota_exceeded']);
    expect(v[1]!.headers).toEqual({ limit: 3, remaining: 1, reset: T0 / 1000 + 100 });
    const last = v[3]!;
    expect(last.kind === 'quota_exceeded' && last.retryAfter).toBe(100);
    expect(await h.engine.readQuota(keyHash, stored)).toEqual({ max: 3, remaining: 0, renews: T0 / 1000 + 100 });
    await h.engine.resetQuota(keyHash, stored);
    expect(await h.engine.readQuota(keyHash, stored)).toEqual({ max: 3, remaining: 3, renews: 0 });
    expect((await h.engine.check({ api: a, method: 'GET', path: '/', keyHash, session: stored })).kind).toBe('allow');
  });

  test('Retry-After of a quota 403 is the wait to the renewal, rounded up once (it rounded the renewal up and now down: up to 2 s over)', async () => {
    const h = harness();
    const stored = session({ quota_max: 3, quota_renewal_rate: 4 });
    h.clock.advance(21); // the period starts at +21 ms and renews at +4,021 ms
    await h.fire(3, { api: a, method: 'GET', path: '/', keyHash, session: stored });
    h.clock.advance(21);
    const v = await h.engine.check({ api: a, method: 'GET', path: '/', keyHash, session: stored });
    expect(v.kind === 'quota_exceeded' && v.retryAfter).toBe(4); // 3.979 s → 4 (was 5)
    h.clock.advance(3000);
    const w = await h.engine.check({ api: a, method: 'GET', path: '/', keyHash, session: stored });
    expect(w.kind === 'quota_exceeded' && w.retryAfter).toBe(1); // 0.979 s → 1 (was 2)
  });

  test('a quota that never renews answers Retry-After of a year, not 1 (clients would retry every second forever)', async () => {
    for (const renewal of [0, -5]) {
      const h = harness();
      const stored = session({ quota_max: 1, quota_renewal_rate: renewal });
      const v = [];
      for (let i = 0; i < 2; i++)
        v.push(await h.engine.check({ api: a, method: 'GET', path: '/', keyHash, session: stored }));
      const last = v[1]!;
      expect(last.kind === 'quota_exceeded' && last.retryAfter).toBe(NEVER_RETRY_AFTER);
    }
    expect(NEVER_RETRY_AFTER).toBe(31_536_000);
  });

  test('adding a key that shares a custom rate-limit key does not reset the group quota; a key of its own is reset', async () => {
    const cfg = config({
      team: {
        rate: 100,
        per: 60,
        quota_max: 2,
        quota_renewal_rate: 3600,
        meta_data: { rate_limit_pattern: '$gw_meta.team' },
      },
    });
    const h = harness({}, cfg);
    const member = (hash: string) => ({
      hash,
      stored: session({ apply_policies: ['team'], meta_data: { team: 'green' } }),
    });
    const [m1, m2] = [member('1'.repeat(64)), member('2'.repeat(64))];
    expect(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash: m1.hash, session: m1.stored })).toEqual([
      'allow',
      'allow',
      'quota_exceeded',
    ]);
    await h.engine.resetQuota(m2.hash, m2.stored); // the facade adding m2 without suppress_reset
    expect(await h.fire(1, { api: a, method: 'GET', path: '/', keyHash: m1.hash, session: m1.stored })).toEqual([
      'quota_exceeded',
    ]);
    expect(await h.fire(1, { api: a, method: 'GET', path: '/', keyHash: m2.hash, session: m2.stored })).toEqual([
      'quota_exceeded',
    ]); // shared
    const own = session({ quota_max: 1, quota_renewal_rate: 3600 });
    expect(await h.fire(2, { api: a, method: 'GET', path: '/', keyHash: '3'.repeat(64), session: own })).toEqual([
      'allow',
      'quota_exceeded',
    ]);
    await h.engine.resetQuota('3'.repeat(64), own);
    expect(await h.fire(1, { api: a, method: 'GET', path: '/', keyHash: '3'.repeat(64), session: own })).toEqual([
      'allow',
    ]);
  });

  test('a per-API quota in access_rights is independent of the key quota', async () => {
    const h = harness();
    const stored = session({
      quota_max: 10,
      quota_renewal_rate: 60,
      access_rights: { a: { limit: { quota_max: 2, quota_renewal_rate: 60 } }, b: {} },
    });
    expect(await h.fire(3, { api: a, method: 'GET', path: '/', keyHash, session: stored })).toEqual([
      'allow',
      'allow',
      'quota_exceeded',
    ]);
    expect(count(await h.fire(5, { api: api('b'), method: 'GET', path: '/', keyHash, session: stored }), 'allow')).toBe(
      5,
    );
    expect(await h.engine.readQuota(keyHash, stored, 'a')).toMatchObject({ max: 2, remaining: 0 });
    expect(await h.engine.readQuota(keyHash, stored)).toMatchObject({ max: 10, remaining: 5 });
  });
});
