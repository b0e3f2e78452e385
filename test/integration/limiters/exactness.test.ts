/**
 * Three engine instances, each with its own connection, sharing one store — a single redis-server and
 * a real 3-master Redis Cluster (redis-cli --cluster create) — under concurrent requests:
 *   sliding log (script) and fixed window admit exactly `rate` per `per`;
 *   the pipelined sliding log never admits more than `rate`;
 *   the sentinel variant stays within rate + k − 1 for waves of k concurrent requests;
 *   DRL: three engines leasing from one counter admit exactly `rate` in a burst, then nothing until the
 *   grants leave the window.
 */
import { Redis } from 'ioredis';
import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions } from '../../../lib/options.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { createEngine, type GatewayEngine } from '../../../sidecar/engine/engine.js';
import type { CompiledApi } from '../../../contract/config.js';
import { startRedisCluster, type RedisClusterHandle } from '../../harness/redis-cluster.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';

const T0 = 1_700_000_040_000; // a multiple of 60 s
const RATE = 50;
const apiFor = (id: string, rate = RATE, per = 60): CompiledApi => ({
  namespace: 'x',
  name: id,
  api_id: id,
  active: true,
  keyless: true,
  authHeader: 'authorization',
  listenPath: `/${id}/`,
  strip: true,
  endpointRules: [],
  apiLimit: { rate, per },
});
const cfg = { hash: '', apis: [], policies: {} };

function engines(
  clients: StoreClient[],
  algo: Record<string, unknown>,
  clock: ManualClock,
  peers?: () => number,
): GatewayEngine[] {
  const options = GatewayOptions.parse({ kv_failure_mode: 'closed', ...algo });
  // a generous deadline: the run shares two cores with builds; a miss would refuse (closed) and show as a failure
  return clients.map((redis) =>
    createEngine({
      options,
      clock,
      config: () => cfg,
      redis,
      peers,
      storeDeadlineMs: 5_000,
      onStoreError: (e) => {
        throw e;
      },
    }),
  );
}

/** n checks at once, round-robin over the engines; admitted per engine. */
async function burst(es: GatewayEngine[], api: CompiledApi, n: number): Promise<number[]> {
  const vs = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      Promise.resolve(es[i % es.length]!.check({ api, method: 'GET', path: '/' })).then((v) => ({
        i: i % es.length,
        ok: v.kind === 'allow',
      })),
    ),
  );
  const per = es.map(() => 0);
  for (const v of vs) if (v.ok) per[v.i]!++;
  return per;
}
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

interface Opened {
  clients: StoreClient[];
  close(): Promise<void>;
  /** Keys per master (cluster only). */
  spread?: () => Promise<number[]>;
}

const topologies: { name: string; open: () => Promise<Opened> }[] = [
  {
    name: 'single redis-server',
    open: async () => {
      (await freshRedis()).disconnect();
      const clients = [0, 1, 2].map(() => new Redis(redisUrl(), { maxRetriesPerRequest: 1 }));
      return { clients, close: async () => clients.forEach((c) => c.disconnect()) };
    },
  },
  {
    name: '3-master Redis Cluster',
    open: async () => {
      const cluster: RedisClusterHandle = await startRedisCluster(3);
      const clients = [0, 1, 2].map(() => createStoreClient(cluster.url, { maxRetriesPerRequest: 1 }));
      await Promise.all(clients.map((c) => (c as { ping(): Promise<string> }).ping()));
      return {
        clients,
        spread: () =>
          Promise.all(
            cluster.nodes.map(async (n) => {
              const c = new Redis({ port: n.port, host: '127.0.0.1' });
              const size = await c.dbsize();
              c.disconnect();
              return size;
            }),
          ),
        close: async () => {
          clients.forEach((c) => c.disconnect());
          await cluster.stop();
        },
      };
    },
  },
];

for (const topo of topologies) {
  describe(`3 engines sharing a ${topo.name}`, () => {
    let clients: StoreClient[];
    let close: () => Promise<void>;
    let spread: Opened['spread'];
    beforeAll(async () => {
      ({ clients, close, spread } = await topo.open());
    }, 60_000);
    afterAll(async () => close());

    test('sliding log (script): exactly rate admitted per window, again after the window', async () => {
      const clock = new ManualClock(T0);
      const es = engines(clients, { enable_kv_rolling_limiter: true }, clock);
      // several buckets so the cluster spreads them over its masters
      for (const id of ['s1', 's2', 's3', 's4']) expect(sum(await burst(es, apiFor(id), 150))).toBe(RATE);
      clock.set(T0 + 30_000);
      expect(sum(await burst(es, apiFor('s1'), 150))).toBe(0);
      clock.set(T0 + 60_001); // the first burst left the window, but the refused one at +30 s is in the log (spike arrest)
      expect(sum(await burst(es, apiFor('s1'), 150))).toBe(0);
      clock.set(T0 + 120_001); // a whole quiet window: the full rate is back
      expect(sum(await burst(es, apiFor('s1'), 150))).toBe(RATE);
    });

    test('fixed window: exactly rate per epoch-aligned window', async () => {
      const clock = new ManualClock(T0 + 1_000);
      const es = engines(clients, { enable_fixed_window_rate_limiter: true }, clock);
      for (const id of ['f1', 'f2', 'f3']) expect(sum(await burst(es, apiFor(id), 150))).toBe(RATE);
      clock.set(T0 + 60_000);
      expect(sum(await burst(es, apiFor('f1'), 150))).toBe(RATE);
    });

    test('pipelined sliding log: never more than rate', async () => {
      const clock = new ManualClock(T0);
      const es = engines(
        clients,
        { enable_kv_rolling_limiter: true, enable_non_transactional_rate_limiter: true },
        clock,
      );
      const admitted = sum(await burst(es, apiFor('p1'), 150));
      expect(admitted).toBeLessThanOrEqual(RATE);
      expect(admitted).toBeGreaterThanOrEqual(RATE - 15);
    });

    test('sentinel: waves of 9 (3 per engine) admit between rate and rate + 8, then nothing for per', async () => {
      const clock = new ManualClock(T0);
      const es = engines(clients, { enable_sentinel_rate_limiter: true }, clock);
      const api = apiFor('sn1');
      const k = 9;
      let admitted = 0;
      let crossedAt = -1;
      const waves: number[] = [];
      for (let w = 0; w < 20; w++) {
        const n = sum(await burst(es, api, k));
        waves.push(n);
        admitted += n;
        if (crossedAt < 0 && admitted >= RATE) crossedAt = w;
        await Promise.all(es.map((e) => e.limiters.settled()));
      }
      expect(admitted).toBeGreaterThanOrEqual(RATE);
      expect(admitted).toBeLessThanOrEqual(RATE + k - 1);
      expect(waves.slice(crossedAt + 1).every((n) => n === 0)).toBe(true);
      clock.advance(60_000);
      expect(sum(await burst(es, api, 3))).toBe(3); // the sentinel lived exactly per
    });

    if (topo.name.includes('Cluster')) {
      test('the buckets of these tests spread over the masters (hash tags per bucket, not one slot for all)', async () => {
        const sizes = await spread!();
        expect(sizes.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
      });
    }
  });
}

describe('DRL over 3 engines leasing from one Redis', () => {
  test('a burst over 3 engines admits exactly the rate in total; nothing more until the grants leave the window', async () => {
    const r = await freshRedis();
    const clients = [0, 1, 2].map(() => createStoreClient(redisUrl(), { maxRetriesPerRequest: 1 }));
    const clock = new ManualClock(T0);
    const es = engines(clients, { drl_threshold: 0 }, clock, () => 3);
    const api = apiFor('d1', 90, 60);
    expect(sum(await burst(es, api, 300))).toBe(90); // the shared counter: no per-gateway share, no full buckets
    clock.advance(30_000);
    expect(sum(await burst(es, api, 300))).toBe(0);
    clock.advance(31_600); // the slot of the first grants has left the window (41 slots of 1.5 s)
    expect(sum(await burst(es, api, 300))).toBe(90);
    for (const e of es) await e.limiters.drl.stop();
    clients.forEach((c) => c.disconnect());
    r.disconnect();
  });
});
