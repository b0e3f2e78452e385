/**
 * Redis Cluster and Redis Sentinel through their URLs, on real servers started here: a 3-master
 * cluster (redis-server --cluster-enabled yes ×3 + redis-cli --cluster create; Redis refuses multi-key
 * commands across slots, so CROSSSLOT would show) and a sentinel watching the run's redis-server.
 * The exactness tests with three engines run against the same kind of cluster (exactness.test.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions } from '../../../lib/options.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { createEngine } from '../../../sidecar/engine/engine.js';
import { freePort } from '../../harness/ports.js';
import { startRedisCluster, type RedisClusterHandle } from '../../harness/redis-cluster.js';
import { api as mkApi, T0 } from '../../unit/engine/fixtures.js';

const api = mkApi('a', {
  endpointRules: [{ method: '*', pattern: '^/?x$', rate: 2, per: 60, id: '* x' }],
  apiLimit: { rate: 100, per: 60 },
});
const session = {
  namespace: 'default',
  session: {
    rate: 3,
    per: 60,
    quota_max: 10,
    quota_renewal_rate: 60,
    smoothing: { enabled: true, threshold: 1, step: 1, trigger: 0.5, delay: 0 },
  },
};

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function server(args: string[]): { proc: ChildProcess; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gw-topo-'));
  const bin = process.env.GW_REDIS_SERVER ?? 'redis-server';
  const proc = spawn(
    bin,
    args.map((a) => a.replace('$DIR', dir)),
    { stdio: 'ignore', cwd: dir },
  );
  return { proc, dir };
}

async function stop(s: { proc: ChildProcess; dir: string }): Promise<void> {
  s.proc.kill('SIGTERM');
  await new Promise((r) => (s.proc.exitCode !== null ? r(null) : s.proc.once('exit', r)));
  rmSync(s.dir, { recursive: true, force: true });
}

/** Every algorithm through one engine: API scope, key scope (smoothed) and quota. */
async function exercise(client: StoreClient, algo: Record<string, boolean>): Promise<string[]> {
  const engine = createEngine({
    options: GatewayOptions.parse({ ...algo, kv_failure_mode: 'closed' }),
    clock: new ManualClock(T0),
    config: () => ({ hash: '', apis: [], policies: {} }),
    redis: client,
    storeDeadlineMs: 5_000,
    onStoreError: (e) => {
      throw e;
    },
  });
  const a = { ...api, namespace: Object.keys(algo).join('+') }; // buckets of their own per algorithm
  const kinds: string[] = [];
  for (let i = 0; i < 4; i++)
    kinds.push(
      (await engine.check({ api: a, method: 'GET', path: '/y', keyHash: `k-${Object.keys(algo).join()}`, session }))
        .kind,
    );
  for (let i = 0; i < 3; i++)
    kinds.push(
      (
        await engine.check({
          api: a,
          method: 'GET',
          path: '/x',
          keyHash: `other-${Object.keys(algo).join()}`,
          session: { namespace: 'default', session: {} },
        })
      ).kind,
    );
  await engine.limiters.settled();
  return kinds;
}

/** Key scope: smoothing lifts A 1 → 2 → 3 = rate, so 3 pass; then the API-level rule on /x: 2 per 60. */
const EXPECTED = ['allow', 'allow', 'allow', 'key_limited', 'allow', 'allow', 'api_limited'];
const algorithms: Record<string, boolean>[] = [
  { enable_kv_rolling_limiter: true },
  { enable_fixed_window_rate_limiter: true },
  { enable_kv_rolling_limiter: true, enable_non_transactional_rate_limiter: true },
];

describe('Redis Cluster (redis+cluster://), 3 masters', () => {
  let cluster: RedisClusterHandle;
  let port: number;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    port = cluster.nodes[0]!.port;
  }, 60_000);
  afterAll(async () => cluster.stop());

  test('the cluster is real: 3 masters share the 16384 slots', async () => {
    const c = new Redis({ port, host: '127.0.0.1' });
    const info = String(await c.call('CLUSTER', 'INFO'));
    expect(info).toContain('cluster_size:3');
    expect(info).toContain('cluster_slots_assigned:16384');
    c.disconnect();
  });

  test('multi-key commands across slots are refused by this server (the check is real)', async () => {
    const c = new Redis({ port, host: '127.0.0.1' });
    await expect(c.mget('gw:{a}:log', 'gw:{b}:log')).rejects.toThrow(/CROSSSLOT/);
    c.disconnect();
  });

  for (const algo of algorithms) {
    test(`${Object.keys(algo).join('+')}: scripts and transactions stay in one slot`, async () => {
      const client = createStoreClient(cluster.url, { maxRetriesPerRequest: 1 });
      client.on('error', () => {});
      const kinds = await exercise(client, algo);
      expect(kinds).toEqual(EXPECTED);
      client.disconnect();
    });
  }

  test('sentinel variant: GET plus background script', async () => {
    const client = createStoreClient(cluster.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    const kinds = await exercise(client, { enable_sentinel_rate_limiter: true });
    // the sentinel's log write is off the request path: sequential requests without waiting may overshoot
    expect(kinds.slice(0, 3)).toEqual(['allow', 'allow', 'allow']);
    expect(kinds.slice(4, 6)).toEqual(['allow', 'allow']);
    client.disconnect();
  });
});

describe('Redis Sentinel (redis+sentinel://)', () => {
  let sentinel: { proc: ChildProcess; dir: string };
  let port: number;
  beforeAll(async () => {
    const master = new URL(process.env.GW_TEST_REDIS_URL!);
    port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'gw-sentinel-conf-'));
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      `port ${port}\nbind 127.0.0.1\nsentinel monitor gwmaster ${master.hostname} ${master.port} 1\n`,
    );
    sentinel = server([conf, '--sentinel']);
    sentinel.dir = dir;
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
    await waitFor(async () => {
      if (probe.status !== 'ready') await probe.connect();
      const addr = (await probe.call('SENTINEL', 'get-master-addr-by-name', 'gwmaster')) as string[] | null;
      return !!addr && addr[1] === master.port;
    }, 'sentinel to know the master');
    probe.disconnect();
  });
  afterAll(async () => stop(sentinel));

  test('the client finds the master through the sentinel and the limiters work on it', async () => {
    const db = Number(process.env.JEST_WORKER_ID ?? '1') + 16; // a database of its own
    const client = createStoreClient(`redis+sentinel://127.0.0.1:${port}/gwmaster/${db}`, { maxRetriesPerRequest: 1 });
    await (client as Redis).flushdb();
    const kinds = await exercise(client, { enable_kv_rolling_limiter: true });
    expect(kinds).toEqual(EXPECTED);
    expect(await (client as Redis).exists('gw:{a:enable_kv_rolling_limiter/a:e:* x}:log')).toBe(1);
    client.disconnect();
  });
});
