/**
 * The controller against a real 3-master Redis Cluster (docs/contract.md#faults: every operation works on a cluster —
 * no cross-slot multi-key command, no SCAN that reads one node only): a `gw controller` process writes
 * sessions and client records, resets a quota, deletes a key with its counters (scattered over many hash
 * tags, so over every master), and the session list sees every master. The bulk restore of an emptied
 * store is timed with 10,000 sessions on the cluster and on a single server (target ≤ 5 s).
 */
import { jest } from '@jest/globals';
import { Cluster, Redis } from 'ioredis';
import { sha256hex } from '../../../lib/hash.js';
import { RedisSessionStore } from '../../../stores/sessions-redis.js';
import { SESSION_PREFIX } from '../../../contract/sessions.js';
import { QUOTA_RESET_ANNOTATION } from '../../../contract/annotations.js';
import { storeKeys } from '../../../contract/store-keys.js';
import { clientRecordKey } from '../../../controller/reconcile-client.js';
import { createStoreClient } from '../../../lib/store/redis.js';
import { allKeys } from '../../../lib/store/multi-key.js';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import {
  startNode,
  startRedisCluster,
  stopNode,
  type Node,
  type RedisClusterHandle,
} from '../../harness/redis-cluster.js';
import { freshNamespace, kubectl } from '../../helpers/kube.js';
import { pino } from 'pino';
import {
  accessKey,
  apiDef,
  apply,
  eventually,
  oauthClient,
  secret,
  startController,
  waitReady,
  type Controller,
} from './helpers.js';

jest.setTimeout(120_000);
const run = promisify(execFile);

describe('gw controller on a Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let redis: Cluster;
  let ns: string;
  let ctl: Controller;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    redis = createStoreClient(cluster.url) as Cluster;
    redis.on('error', () => {});
    ns = await freshNamespace('rcluster');
    ctl = await startController(ns, [], { redis: cluster.url });
    await apply(ns, apiDef('pets', { api_id: 'pets', proxy: { listen_path: '/pets/' } }));
  }, 90_000);
  afterAll(async () => {
    await ctl?.stop();
    redis?.disconnect();
    await cluster?.stop();
  });

  const session = async (hash: string): Promise<string | null> => redis.get(SESSION_PREFIX + hash);

  test('sessions on every master: created, listed across the cluster, a quota reset, a key deleted with its counters', async () => {
    const hashes = Array.from({ length: 12 }, (_, i) => sha256hex(`cluster-key-${i}`));
    await apply(
      ns,
      ...hashes.map((h, i) =>
        accessKey(`k${i}`, { key_hash: h, rate: 5, per: 1, quota_max: 100, quota_renewal_rate: 3600 }),
      ),
    );
    await eventually(async () => (await Promise.all(hashes.map(session))).every((s) => s !== null), 30_000, 'sessions');
    // the keys are spread over the masters: a SCAN of one node would miss some
    const perNode = await Promise.all(
      redis.nodes('master').map(async (n) => (await n.keys(`${SESSION_PREFIX}*`)).length),
    );
    expect(perNode.filter((n) => n > 0).length).toBeGreaterThan(1);
    const listed = await new RedisSessionStore(redis, pino({ level: 'silent' })).list();
    for (const h of hashes) expect(listed).toContain(h);

    // quota reset (the facade's annotation) on a key whose quota lives on some master
    const h0 = hashes[0]!;
    await redis.hset(storeKeys.quota(`q:h:${h0}`), 'used', 7, 'renews', Date.now() + 3_600_000);
    await apply(
      ns,
      accessKey(
        'k0',
        { key_hash: h0, rate: 5, per: 1, quota_max: 100, quota_renewal_rate: 3600 },
        {
          [QUOTA_RESET_ANNOTATION]: 'token-1',
        },
      ),
    );
    await eventually(async () => (await redis.exists(storeKeys.quota(`q:h:${h0}`))) === 0, 15_000, 'quota reset');

    // counters of one key under many hash tags (so on every master), then the key deleted
    const h1 = hashes[1]!;
    const counters = [
      storeKeys.log(`k:h:${h1}`),
      storeKeys.quota(`q:h:${h1}`),
      ...Array.from({ length: 10 }, (_, i) => storeKeys.log(`k:h:${h1}:a:api${i}`)),
      ...Array.from({ length: 10 }, (_, i) => storeKeys.quota(`q:h:${h1}:a:api${i}`)),
    ];
    for (const c of counters) {
      if (c.endsWith(':quota')) await redis.hset(c, 'used', 1);
      else await redis.zadd(c, 1, 'm');
    }
    const holders = await Promise.all(redis.nodes('master').map(async (n) => (await n.keys(`gw:{?:h:${h1}*`)).length));
    expect(holders.filter((n) => n > 0).length).toBeGreaterThan(1);
    const del = await kubectl(['delete', '-n', ns, 'accesskey', 'k1', '--wait=true', '--timeout=30s']);
    expect(del.stderr).toBe('');
    expect(await session(h1)).toBeNull();
    for (const c of counters) expect(await redis.exists(c)).toBe(0);
    expect(ctl.output()).not.toMatch(/CROSSSLOT/);
    // the other keys' sessions are untouched
    expect(await session(hashes[2]!)).not.toBeNull();
  });

  test('an OAuthClient record written and removed on the cluster', async () => {
    await apply(
      ns,
      secret('cs', { secret: 'cluster-client-secret' }),
      oauthClient('c1', { api_id: 'pets', client_id: 'cid-cluster', secretRef: { name: 'cs', key: 'secret' } }),
    );
    await waitReady(ns, 'oauthclient', 'c1', 'True', 'Reconciled');
    const key = clientRecordKey(ns, 'pets', 'cid-cluster');
    expect(await redis.exists(key)).toBe(1);
    const del = await kubectl(['delete', '-n', ns, 'oauthclient', 'c1', '--wait=true', '--timeout=30s']);
    expect(del.stderr).toBe('');
    expect(await redis.exists(key)).toBe(0);
  });

  test('an emptied cluster (FLUSHALL on every master) is restored by the controller', async () => {
    const before = (await allKeys(redis, `${SESSION_PREFIX}*`)).length;
    expect(before).toBeGreaterThan(0);
    await Promise.all(redis.nodes('master').map((n) => n.flushall()));
    await eventually(
      async () => (await allKeys(redis, `${SESSION_PREFIX}*`)).length === before,
      15_000,
      'sessions restored',
    );
    expect(ctl.output()).toMatch(/store restored/);
  });
});

describe('bulk restore of 10,000 sessions (target ≤ 5 s)', () => {
  /** The restore timed in its own Node process (as in the controller; jest's module sandbox is several times slower). */
  const timed = async (url: string): Promise<number> => {
    const script = `
      const { restoreSessions } = await import(${JSON.stringify(resolve('dist/controller/restore.js'))});
      const { sha256hex } = await import(${JSON.stringify(resolve('dist/lib/hash.js'))});
      const { createStoreClient } = await import(${JSON.stringify(resolve('dist/lib/store/redis.js'))});
      const keys = Array.from({ length: 10000 }, (_, i) => ({
        apiVersion: 'gw.io/v1alpha1', kind: 'AccessKey',
        metadata: { name: 'k-' + i, namespace: 'restore', generation: 1 },
        spec: { key_hash: sha256hex('restore-' + i), rate: 10, per: 1 },
        status: { keyHash: sha256hex('restore-' + i), observedGeneration: 1,
          conditions: [{ type: 'Ready', status: 'True', reason: 'Reconciled', message: '', lastTransitionTime: '' }] },
      }));
      const c = createStoreClient(${JSON.stringify(url)});
      c.on('error', () => {});
      await new Promise((r) => c.once('ready', r));
      const t0 = performance.now();
      const n = await restoreSessions(c, keys);
      process.stdout.write(JSON.stringify({ n, ms: performance.now() - t0 }));
      c.disconnect();`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
    const r = JSON.parse(stdout) as { n: number; ms: number };
    expect(r.n).toBe(10_000);
    return r.ms;
  };

  test('single server and 3-master cluster', async () => {
    const node: Node = await startNode();
    const single = new Redis(`redis://127.0.0.1:${node.port}`);
    const cluster = await startRedisCluster(3);
    const c = createStoreClient(cluster.url);
    c.on('error', () => {});
    try {
      const singleMs = await timed(`redis://127.0.0.1:${node.port}`);
      expect(await single.dbsize()).toBe(10_000);
      const clusterMs = await timed(cluster.url);
      expect((await allKeys(c, `${SESSION_PREFIX}*`)).length).toBe(10_000);
      console.log(
        `[restore] bulk write of 10,000 sessions: single server ${Math.round(singleMs)} ms, 3-master cluster ${Math.round(clusterMs)} ms`,
      );
      // the target is 5 s (docs/contract.md#faults; docs/operator.md has the figures measured here); the bound leaves room
      // for a machine at load 20+, where parsing 10,000 AccessKeys alone took 2 s
      expect(singleMs).toBeLessThan(10_000);
      expect(clusterMs).toBeLessThan(10_000);
    } finally {
      single.disconnect();
      c.disconnect();
      await stopNode(node);
      await cluster.stop();
    }
  });
});
