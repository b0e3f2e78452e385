/**
 * Redis outages, with a redis-server of the test's own: while Redis is down an AccessKey says
 * Ready=False StoreUnavailable; when Redis comes back (empty, as after a restart without persistence)
 * the controller resyncs at once, well before its resync period (10 min here). FLUSHALL on a live
 * Redis is repaired by the store check (a marker key), also well before the resync period.
 */
import { jest } from '@jest/globals';
import { Redis } from 'ioredis';
import { sha256hex } from '../../../lib/hash.js';
import { SESSION_PREFIX } from '../../../contract/sessions.js';
import { startRedis, type RedisHandle } from '../../harness/redis.js';
import { freePort } from '../../harness/ports.js';
import { freshNamespace } from '../../helpers/kube.js';
import { accessKey, apply, eventually, startController, waitReady, type Controller } from './helpers.js';

jest.setTimeout(60_000);

describe('gw controller: Redis outages', () => {
  let ns: string;
  let port: number;
  let server: RedisHandle | undefined;
  let ctl: Controller;

  beforeAll(async () => {
    ns = await freshNamespace('outage');
    port = await freePort();
  });
  afterAll(async () => {
    await ctl?.stop();
    await server?.stop();
  });

  test('Redis down → StoreUnavailable; Redis back (empty) → sessions written at once, Ready again', async () => {
    ctl = await startController(ns, ['--resync-period', '600'], {
      redis: `redis://127.0.0.1:${port}`,
      waitReady: false,
    });
    await apply(ns, accessKey('k', { key_hash: sha256hex('outage-key'), rate: 1, per: 1 }));
    const r = await waitReady(ns, 'accesskey', 'k', 'False', 'StoreUnavailable', 15_000);
    expect(r.message).toMatch(/Redis/);

    server = await startRedis(port);
    const client = new Redis(server.url);
    try {
      await eventually(
        async () => (await client.exists(SESSION_PREFIX + sha256hex('outage-key'))) === 1,
        10_000,
        'session after Redis came up',
      );
      await waitReady(ns, 'accesskey', 'k', 'True', 'Reconciled');

      // a restart loses everything (no persistence): the reconnect resyncs at once
      await server.stop();
      server = await startRedis(port);
      const t0 = Date.now();
      await eventually(
        async () => (await client.exists(SESSION_PREFIX + sha256hex('outage-key'))) === 1,
        10_000,
        'session after the restart',
      );
      expect(Date.now() - t0).toBeLessThan(10_000);
      expect(ctl.output()).toContain('Redis reconnected: full resync');
    } finally {
      client.disconnect();
    }
  });

  test('FLUSHALL on a live Redis → sessions restored by the marker-key check, long before the resync period', async () => {
    const client = new Redis(server!.url);
    try {
      const key = SESSION_PREFIX + sha256hex('outage-key');
      await eventually(async () => (await client.exists(key)) === 1, 10_000, 'session present before the flush');
      await client.flushall();
      expect(await client.exists(key)).toBe(0);
      const t0 = Date.now();
      // --resync-period is 600 s here: only the store check (default every 5 s) can bring it back in time
      await eventually(async () => (await client.exists(key)) === 1, 15_000, 'session after FLUSHALL');
      expect(Date.now() - t0).toBeLessThan(15_000);
      await waitReady(ns, 'accesskey', 'k', 'True', 'Reconciled');
    } finally {
      client.disconnect();
    }
  });

  test('controllers of two namespaces sharing one Redis: after FLUSHALL each restores its own keys (one marker per scope)', async () => {
    const ns2 = await freshNamespace('outage2');
    const ctl2 = await startController(ns2, ['--resync-period', '600'], { redis: server!.url });
    const client = new Redis(server!.url);
    try {
      await apply(ns2, accessKey('k2', { key_hash: sha256hex('outage-key-2'), rate: 1, per: 1 }));
      await waitReady(ns2, 'accesskey', 'k2', 'True', 'Reconciled');
      const keys = [SESSION_PREFIX + sha256hex('outage-key'), SESSION_PREFIX + sha256hex('outage-key-2')];
      await eventually(async () => (await client.exists(...keys)) === 2, 10_000, 'both sessions before the flush');
      // both controllers have set their marker by now (check every 5 s)
      await eventually(
        async () => (await client.keys('gw:controller:marker:*')).length === 2,
        15_000,
        'a marker per controller',
      );
      await client.flushall();
      // with one marker for both, only the controller that set it again first resynced (the other waited for its 600 s period)
      await eventually(async () => (await client.exists(...keys)) === 2, 15_000, 'both sessions after FLUSHALL');
      // the same key in both namespaces: the controller of the second refuses it (the two used to take the
      // session from each other on every resync)
      await apply(ns2, accessKey('dup', { key_hash: sha256hex('outage-key'), rate: 9, per: 1 }));
      const r = await waitReady(ns2, 'accesskey', 'dup', 'False', 'InvalidSpec');
      expect(r.message).toBe(
        `the same key is already used by AccessKey ${ns}/k (a namespace this controller does not watch)`,
      );
      expect(JSON.parse((await client.get(keys[0]!))!)).toMatchObject({ namespace: ns, name: 'k' });
    } finally {
      client.disconnect();
      await ctl2.stop();
    }
  });
});
