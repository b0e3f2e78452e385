/**
 * Two `gw controller --leader-elect` processes on one Lease: exactly one writes; SIGKILL of the leader
 * hands over within the lease duration; every write happens once (no lost or duplicated writes),
 * counted from both controllers' gw_controller_writes_total.
 */
import { jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import { sha256hex } from '../../../lib/hash.js';
import { SESSION_PREFIX } from '../../../contract/sessions.js';
import { freshNamespace } from '../../helpers/kube.js';
import { freshRedis } from '../../helpers/redis.js';
import { accessKey, apply, eventually, startController, type Controller } from './helpers.js';

jest.setTimeout(90_000);

const LEASE_S = 4;

describe('gw controller: leader election', () => {
  let ns: string;
  let redis: Redis;
  let a: Controller;
  let b: Controller;

  beforeAll(async () => {
    ns = await freshNamespace('lease');
    redis = await freshRedis();
    const flags = (id: string) => [
      '--leader-elect',
      '--lease-duration',
      String(LEASE_S),
      '--lease-namespace',
      ns,
      '--identity',
      id,
    ];
    [a, b] = await Promise.all([startController(ns, flags('ctl-a')), startController(ns, flags('ctl-b'))]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
    redis?.disconnect();
  });

  const sessions = async (n: number, prefix: string): Promise<number> => {
    let c = 0;
    for (let i = 0; i < n; i++) c += await redis.exists(SESSION_PREFIX + sha256hex(`${prefix}-${i}`));
    return c;
  };
  const keys = (n: number, prefix: string) =>
    Array.from({ length: n }, (_, i) =>
      accessKey(`${prefix}-${i}`, { key_hash: sha256hex(`${prefix}-${i}`), rate: 1, per: 1 }),
    );
  const writes = async (c: Controller, target: string) => c.metric('gw_controller_writes_total', { target });

  test('one leader writes; killing it hands over within the lease; every session is written exactly once', async () => {
    const leader = await eventually(
      async () => {
        const [la, lb] = [await a.metric('gw_controller_leader'), await b.metric('gw_controller_leader')];
        if (la + lb !== 1) return undefined;
        return la === 1 ? a : b;
      },
      15_000,
      'exactly one leader',
    );
    const follower = leader === a ? b : a;

    await apply(ns, ...keys(20, 'first'));
    await eventually(async () => (await sessions(20, 'first')) === 20, 20_000, '20 sessions');
    await new Promise((r) => setTimeout(r, 500));
    expect(await writes(leader, 'session')).toBe(20);
    expect(await writes(follower, 'session')).toBe(0);
    expect(await writes(follower, 'status')).toBe(0);
    expect(await writes(follower, 'finalizer')).toBe(0);

    const killedAt = Date.now();
    await leader.stop('SIGKILL');
    // written while nobody leads: must not be lost
    await apply(ns, ...keys(5, 'gap'));
    await eventually(
      async () => (await follower.metric('gw_controller_leader')) === 1,
      (LEASE_S + 4) * 1000,
      'takeover',
    );
    const handoverMs = Date.now() - killedAt;
    console.log(`[operator] leader handover after SIGKILL: ${handoverMs} ms (lease ${LEASE_S} s)`);
    expect(handoverMs).toBeLessThanOrEqual(LEASE_S * 1000 + 1500);

    await apply(ns, ...keys(5, 'after'));
    await eventually(
      async () => (await sessions(5, 'gap')) + (await sessions(5, 'after')) === 10,
      20_000,
      '10 more sessions',
    );
    await new Promise((r) => setTimeout(r, 500));
    // the new leader resynced everything but rewrote none of the 20 it found in Redis
    expect(await writes(follower, 'session')).toBe(10);
    expect(await sessions(20, 'first')).toBe(20);
  });

  test("GW_LEADER_ELECT=false turns leader election off (commander would take any value of a plain flag's variable as on)", async () => {
    const ns2 = await freshNamespace('lease-off');
    for (const [value, want] of [
      ['false', false],
      ['0', false],
      ['true', true],
    ] as const) {
      const c = await startController(ns2, ['--lease-namespace', ns2, '--lease-duration', String(LEASE_S)], {
        env: { GW_LEADER_ELECT: value },
      });
      try {
        await eventually(async () => c.output().includes('"leaderElect"'), 10_000, 'ready line');
        expect(c.output()).toContain(`"leaderElect":${want}`);
      } finally {
        await c.stop('SIGTERM');
      }
    }
  });
});
