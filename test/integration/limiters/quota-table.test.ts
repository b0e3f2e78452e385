/**
 * One behaviour table for quotas, run against both implementations: MemoryQuota and RedisQuota (the
 * quota-consume.lua script on the run's real redis-server). The Redis script takes `now` as an argument, so
 * both run on the same injected clock and the table needs no real waiting.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../../lib/clock.js';
import { MemoryQuota, RedisQuota, type QuotaStore } from '../../../limiters/quota.js';
import { freshRedis } from '../../helpers/redis.js';

const T0 = 1_700_000_040_000;
let redis: Redis | undefined;
afterAll(() => redis?.disconnect());

const storages: [string, (clock: ManualClock) => Promise<QuotaStore>][] = [
  ['memory', async (clock) => new MemoryQuota(clock)],
  ['redis', async (clock) => new RedisQuota((redis ??= await freshRedis()), clock)],
];

let n = 0;
const bucket = (): string => `quota-table-${process.pid}-${++n}`;

describe.each(storages)('quota behaviour (%s)', (_name, make) => {
  test('exactly quota_max per renewal period; remaining and renews kept current; renewed at the boundary', async () => {
    const clock = new ManualClock(T0);
    const q = await make(clock);
    const b = bucket();
    const spec = { max: 3, renewal: 3600 };
    expect(await q.read(b, spec)).toEqual({ remaining: 3, renews: 0 });
    const rs = [];
    for (let i = 0; i < 5; i++) rs.push(await q.consume(b, spec));
    expect(rs.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
    expect(rs.map((r) => r.remaining)).toEqual([2, 1, 0, 0, 0]);
    expect(rs[0]!.renews).toBe(T0 / 1000 + 3600);
    expect(await q.read(b, spec)).toEqual({ remaining: 0, renews: T0 / 1000 + 3600 });
    clock.set(T0 + 3_599_999);
    expect((await q.consume(b, spec)).allowed).toBe(false);
    clock.set(T0 + 3_600_000);
    expect(await q.consume(b, spec)).toEqual({
      allowed: true,
      max: 3,
      remaining: 2,
      renews: T0 / 1000 + 7200,
      renewsMs: T0 + 7_200_000,
    });
  });

  test('quota_renewal_rate ≤ 0 never renews', async () => {
    const clock = new ManualClock(T0);
    const q = await make(clock);
    const b = bucket();
    const spec = { max: 2, renewal: 0 };
    await q.consume(b, spec);
    await q.consume(b, spec);
    clock.advance(10 * 365 * 86_400_000);
    const r = await q.consume(b, spec);
    expect(r.allowed).toBe(false);
    expect(r.renews).toBe(0);
  });

  test('reset gives the whole quota back; buckets are independent', async () => {
    const clock = new ManualClock(T0);
    const q = await make(clock);
    const [a, b] = [bucket(), bucket()];
    const spec = { max: 1, renewal: 60 };
    expect((await q.consume(a, spec)).allowed).toBe(true);
    expect((await q.consume(a, spec)).allowed).toBe(false);
    expect((await q.consume(b, spec)).allowed).toBe(true);
    await q.reset(a);
    expect(await q.read(a, spec)).toEqual({ remaining: 1, renews: 0 });
    expect((await q.consume(a, spec)).allowed).toBe(true);
  });

  test('a lowered quota_max refuses at once; a raised one admits up to it (the count is kept)', async () => {
    const clock = new ManualClock(T0);
    const q = await make(clock);
    const b = bucket();
    for (let i = 0; i < 3; i++) await q.consume(b, { max: 5, renewal: 60 });
    expect((await q.consume(b, { max: 2, renewal: 60 })).allowed).toBe(false);
    const raised = await q.consume(b, { max: 6, renewal: 60 });
    expect(raised.allowed).toBe(true);
    expect(raised.remaining).toBe(2);
  });
});
