import { api, harness, session } from './fixtures.js';
import type { Harness } from './fixtures.js';

const KEY = 'c'.repeat(64);

/** A sleep that moves the manual clock (no real waiting) and records the waits. */
function clockSleep(get: () => Harness, waits: number[]) {
  return async (ms: number) => {
    waits.push(ms);
    get().clock.advance(ms);
  };
}

describe('throttling (docs/contract.md#throttling)', () => {
  test('a refused request is re-checked every throttle_interval, up to throttle_retry_limit times, then 429', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const key = session({ rate: 1, per: 10, throttle_interval: 2, throttle_retry_limit: 3 });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: key };
    expect((await h.engine.check(r)).kind).toBe('allow');
    expect((await h.engine.check(r)).kind).toBe('key_limited');
    expect(waits).toEqual([2000, 2000, 2000]);
  });

  test('success on a retry', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const key = session({ rate: 1, per: 3, throttle_interval: 3, throttle_retry_limit: 2 });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: key };
    expect((await h.engine.check(r)).kind).toBe('allow');
    expect((await h.engine.check(r)).kind).toBe('allow');
    expect(waits).toEqual([3000]);
  });

  test("sliding log: a throttled request's own refused attempts do not hold it back (staggered arrivals)", async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const key = session({ rate: 2, per: 3, throttle_interval: 1, throttle_retry_limit: 2 });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: key };
    const t0 = h.clock.now();
    expect((await h.engine.check(r)).kind).toBe('allow'); // A at 0 s
    h.clock.set(t0 + 1000);
    expect((await h.engine.check(r)).kind).toBe('allow'); // B at 1 s
    h.clock.set(t0 + 1500);
    // C at 1.5 s: refused, retried at 2.5 s (A and B in the window), admitted at 3.5 s (A left, only B)
    expect((await h.engine.check(r)).kind).toBe('allow');
    expect(waits).toEqual([1000, 1000]);
  });

  test('sliding log: a throttled request that finally gets its 429 enters the log once, at that moment', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const key = session({ rate: 1, per: 10, throttle_interval: 1, throttle_retry_limit: 2 });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: key };
    const t0 = h.clock.now();
    expect((await h.engine.check(r)).kind).toBe('allow'); // A at 0 s
    expect((await h.engine.check(r)).kind).toBe('key_limited'); // B: tried at 0, 1, 2 s; its refusal logged at 2 s
    expect(waits).toEqual([1000, 1000]);
    // A (0 s) has left the window at 10.5 s; B's entry, written with its final refusal at 2 s, has not
    const noThrottle = { ...r, session: session({ rate: 1, per: 10 }) }; // the same key, so the same bucket
    h.clock.set(t0 + 10_500);
    expect((await h.engine.check(noThrottle)).kind).toBe('key_limited');
  });

  test('sliding log: a throttled request counts once, so it is admitted as soon as the window frees', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const key = session({ rate: 2, per: 3, throttle_interval: 1, throttle_retry_limit: 5 });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: key };
    expect((await h.engine.check(r)).kind).toBe('allow');
    expect((await h.engine.check(r)).kind).toBe('allow');
    expect((await h.engine.check(r)).kind).toBe('allow'); // refused at T0, retried at +1 s, +2 s, admitted at +3 s
    expect(waits).toEqual([1000, 1000, 1000]);
  });

  test("a per-API limit is throttled with its own throttle fields; without them with the key's", async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const perApi = session({
      throttle_interval: 5,
      throttle_retry_limit: 1,
      access_rights: { a: { api_id: 'a', limit: { rate: 1, per: 60, throttle_interval: 2, throttle_retry_limit: 2 } } },
    });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: perApi };
    await h.engine.check(r);
    expect((await h.engine.check(r)).kind).toBe('key_limited');
    expect(waits).toEqual([2000, 2000]);
    waits.length = 0;
    const keyOnly = session({
      throttle_interval: 5,
      throttle_retry_limit: 1,
      access_rights: { a: { api_id: 'a', limit: { rate: 1, per: 60 } } },
    });
    const r2 = { ...r, keyHash: 'd'.repeat(64), session: keyOnly };
    await h.engine.check(r2);
    expect((await h.engine.check(r2)).kind).toBe('key_limited');
    expect(waits).toEqual([5000]);
  });

  test('throttle_retry_limit -1 (Tyk\'s "off") refuses at once', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const r = {
      api: api('a'),
      method: 'GET',
      path: '/',
      keyHash: KEY,
      session: session({ rate: 1, per: 3, throttle_interval: -1, throttle_retry_limit: -1 }),
    };
    await h.engine.check(r);
    expect((await h.engine.check(r)).kind).toBe('key_limited');
    expect(waits).toEqual([]);
  });

  test('without throttle_retry_limit the refusal is immediate', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const r = {
      api: api('a'),
      method: 'GET',
      path: '/',
      keyHash: KEY,
      session: session({ rate: 1, per: 3, throttle_interval: 3 }),
    };
    await h.engine.check(r);
    expect((await h.engine.check(r)).kind).toBe('key_limited');
    expect(waits).toEqual([]);
  });

  test('waiting requests are bounded: over max_throttled_requests a request is refused at once', async () => {
    const release: (() => void)[] = [];
    const h = harness({ max_throttled_requests: 1 }, undefined, {
      sleep: () => new Promise<void>((res) => release.push(res)),
    });
    const r = {
      api: api('a'),
      method: 'GET',
      path: '/',
      keyHash: KEY,
      session: session({ rate: 1, per: 60, throttle_interval: 1, throttle_retry_limit: 1 }),
    };
    await h.engine.check(r);
    const waiting = h.engine.check(r);
    await new Promise((res) => setImmediate(res));
    expect(release).toHaveLength(1);
    expect((await h.engine.check(r)).kind).toBe('key_limited'); // no slot: answered without waiting
    expect(release).toHaveLength(1);
    release[0]!();
    expect((await waiting).kind).toBe('key_limited');
  });

  test('a request abandoned while it waits (stillWanted: false) is not checked again and counts against nothing', async () => {
    const waits: number[] = [];
    const h: Harness = harness({}, undefined, { sleep: clockSleep(() => h, waits) });
    const key = session({
      rate: 1,
      per: 10,
      throttle_interval: 1,
      throttle_retry_limit: 20,
      quota_max: 5,
      quota_renewal_rate: 3600,
    });
    const r = { api: api('a'), method: 'GET', path: '/', keyHash: KEY, session: key };
    expect((await h.engine.check(r)).kind).toBe('allow');
    let asked = 0;
    // wanted for 12 waits (the window frees after 10), so without the check it would have been admitted
    const goneAfterOne = { ...r, stillWanted: () => ++asked < 2 };
    expect((await h.engine.check(goneAfterOne)).kind).toBe('disallowed');
    expect(waits).toEqual([1000, 1000]);
    expect((await h.engine.readQuota(KEY, key))?.remaining).toBe(4); // only the first request
    // nothing entered the log: a request 10 s after the first is admitted
    h.clock.advance(8000);
    expect(
      (await h.engine.check({ ...r, session: session({ rate: 1, per: 10, quota_max: 5, quota_renewal_rate: 3600 }) }))
        .kind,
    ).toBe('allow');
  });

  test('a client that leaves ends the wait at once and frees its slot', async () => {
    const release: (() => void)[] = [];
    const h = harness({ max_throttled_requests: 1 }, undefined, {
      sleep: () => new Promise<void>((res) => release.push(res)),
    });
    const r = {
      api: api('a'),
      method: 'GET',
      path: '/',
      keyHash: KEY,
      session: session({ rate: 1, per: 60, throttle_interval: 30, throttle_retry_limit: 1 }),
    };
    await h.engine.check(r);
    let leave: (() => void) | undefined;
    let gone = false;
    const first = h.engine.check({
      ...r,
      onClientGone: (wake: () => void) => (leave = () => ((gone = true), wake())),
      stillWanted: () => !gone,
    });
    await new Promise((res) => setImmediate(res));
    expect(release).toHaveLength(1);
    leave!(); // its sleep is never released: leaving alone ends the wait
    expect((await first).kind).toBe('disallowed');
    // the slot is free: the next refused request waits instead of being refused at once
    const next = h.engine.check(r);
    await new Promise((res) => setImmediate(res));
    expect(release).toHaveLength(2);
    release[1]!();
    expect((await next).kind).toBe('key_limited');
  });

  test('the default sleep is a real timer', async () => {
    const h = harness();
    const r = {
      api: api('a'),
      method: 'GET',
      path: '/',
      keyHash: KEY,
      session: session({ rate: 1, per: 60, throttle_interval: 0.05, throttle_retry_limit: 2 }),
    };
    await h.engine.check(r);
    const t = Date.now();
    expect((await h.engine.check(r)).kind).toBe('key_limited');
    expect(Date.now() - t).toBeGreaterThanOrEqual(90);
  });
});
