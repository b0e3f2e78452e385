/**
 * Store faults on real servers: a private redis-server stopped in the middle of the test and started
 * again on the same port (decisions follow kv_failure_mode, no exception escapes, limits are enforced
 * again once it is back), and a store that accepts connections but never answers (a 50 ms deadline; the default is 1 s).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions } from '../../../lib/options.js';
import { createStoreClient, type StoreClient } from '../../../lib/store/redis.js';
import { createEngine, type GatewayEngine } from '../../../sidecar/engine/engine.js';
import type { CompiledApi } from '../../../contract/config.js';
import type { Verdict } from '../../../sidecar/engine/types.js';
import { StoreDeadlineError, StoreUnavailableError } from '../../../lib/store/store-calls.js';
import { startNode, stopNode, type Node } from '../../harness/redis-cluster.js';
import { api as mkApi, T0 } from '../../unit/engine/fixtures.js';

const api = (id: string): CompiledApi => mkApi(id, { namespace: 'o', apiLimit: { rate: 3, per: 60 } });
const session = { namespace: 'o', session: { rate: 100, per: 60, quota_max: 1000, quota_renewal_rate: 3600 } };
const cfg = { hash: '', apis: [], policies: {} };

async function until(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('store outage: redis-server stopped mid-test, then back', () => {
  let node: Node;
  let client: StoreClient;
  const algorithms: Record<string, boolean>[] = [
    { enable_kv_rolling_limiter: true },
    { enable_sentinel_rate_limiter: true },
    { enable_fixed_window_rate_limiter: true },
  ];
  beforeAll(async () => {
    node = await startNode();
    client = createStoreClient(`redis://127.0.0.1:${node.port}`, {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => 50,
    });
    client.on('error', () => {});
    await until(() => client.status === 'ready', 5_000);
  });
  afterAll(async () => {
    client.disconnect();
    await stopNode(node);
  });

  test('open admits, closed refuses with Retry-After 1, nothing throws; limits are enforced again after recovery', async () => {
    const clock = new ManualClock(T0);
    const errors: Error[] = [];
    const mk = (mode: 'open' | 'closed', algo: Record<string, boolean>): GatewayEngine =>
      createEngine({
        options: GatewayOptions.parse({ ...algo, kv_failure_mode: mode }),
        clock,
        config: () => cfg,
        redis: client,
        storeDeadlineMs: 2_000,
        onStoreError: (e) => errors.push(e),
      });
    const pairs = algorithms.map((a, i) => ({
      name: Object.keys(a)[0]!,
      open: mk('open', a),
      closed: mk('closed', a),
      api: api(`o${i}`),
      capi: api(`c${i}`),
    }));
    const fire = async (e: GatewayEngine, a: CompiledApi, n: number, key: string): Promise<Verdict[]> => {
      const out: Verdict[] = [];
      for (let i = 0; i < n; i++) {
        out.push(await e.check({ api: a, method: 'GET', path: '/', keyHash: key, session }));
        await e.limiters.settled();
      }
      return out;
    };
    // before: the limit holds
    for (const p of pairs)
      expect((await fire(p.open, p.api, 4, `k-${p.name}`)).map((v) => v.kind)).toEqual([
        'allow',
        'allow',
        'allow',
        'api_limited',
      ]);
    expect(errors).toEqual([]);

    await stopNode(node, true); // the store goes away
    await until(() => client.status !== 'ready', 5_000);
    for (const p of pairs) {
      const t = Date.now();
      const open = await fire(p.open, p.api, 5, `k-${p.name}`);
      const closed = await fire(p.closed, p.capi, 5, `c-${p.name}`);
      expect(Date.now() - t).toBeLessThan(5_000); // nothing hangs
      expect(open.map((v) => v.kind)).toEqual(Array(5).fill('allow'));
      expect(closed.map((v) => v.kind)).toEqual(Array(5).fill('unavailable'));
      for (const v of closed) expect(v.kind !== 'allow' && v.retryAfter).toBe(1);
    }
    expect(errors.length).toBeGreaterThanOrEqual(algorithms.length * 10);

    node = await startNode([], node.port, node.dir); // back on the same port (empty: no persistence)
    await until(() => client.status === 'ready', 10_000);
    errors.length = 0;
    for (const p of pairs) {
      expect((await fire(p.open, p.api, 4, `k-${p.name}`)).map((v) => v.kind)).toEqual([
        'allow',
        'allow',
        'allow',
        'api_limited',
      ]);
      expect((await fire(p.closed, p.capi, 4, `c-${p.name}`)).map((v) => v.kind)).toEqual([
        'allow',
        'allow',
        'allow',
        'api_limited',
      ]);
    }
    expect(errors).toEqual([]);
  }, 60_000);
});

describe('store outage with an offline queue (the standalone client): no call waits for a reconnection', () => {
  test('while the connection is lost, each decision follows kv_failure_mode at once', async () => {
    const node = await startNode();
    // as cli/standalone.ts builds it, with a reconnection delay long enough to see a call wait for it
    const client = createStoreClient(`redis://127.0.0.1:${node.port}`, {
      maxRetriesPerRequest: 1,
      retryStrategy: () => 10_000,
    });
    client.on('error', () => {});
    try {
      await until(() => client.status === 'ready', 5_000);
      const errors: Error[] = [];
      const mk = (mode: 'open' | 'closed'): GatewayEngine =>
        createEngine({
          options: GatewayOptions.parse({
            enable_kv_rolling_limiter: true,
            kv_failure_mode: mode,
            kv_deadline_ms: 3_000,
          }),
          clock: new ManualClock(T0),
          config: () => cfg,
          redis: client,
          onStoreError: (e) => errors.push(e),
        });
      const open = mk('open');
      const closed = mk('closed');
      expect((await open.check({ api: api('q'), method: 'GET', path: '/', keyHash: 'k', session })).kind).toBe('allow');
      await stopNode(node, true);
      await until(() => client.status === 'reconnecting', 5_000);
      const t = performance.now();
      for (let i = 0; i < 5; i++) {
        expect((await open.check({ api: api('q'), method: 'GET', path: '/', keyHash: 'k', session })).kind).toBe(
          'allow',
        );
        expect((await closed.check({ api: api('q'), method: 'GET', path: '/', keyHash: 'k', session })).kind).toBe(
          'unavailable',
        );
      }
      expect(performance.now() - t).toBeLessThan(1_000); // ten decisions; a queued call would wait 3 s for its deadline
      expect(errors.length).toBeGreaterThanOrEqual(10);
      expect(errors.every((e) => e instanceof StoreUnavailableError)).toBe(true);
    } finally {
      client.disconnect();
    }
  }, 30_000);
});

describe('store deadline', () => {
  let black: Server;
  let port: number;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    black = createServer((s) => {
      sockets.push(s);
      s.on('error', () => {});
    }); // accepts, reads, never answers
    await new Promise<void>((r) => black.listen(0, '127.0.0.1', r));
    port = (black.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => black.close(r));
  });

  test('a store that never answers: each decision follows kv_failure_mode after its deadline (kv_deadline_ms: 50)', async () => {
    const client = createStoreClient(`redis://127.0.0.1:${port}`, { enableReadyCheck: false, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    const errors: Error[] = [];
    const mk = (mode: 'open' | 'closed'): GatewayEngine =>
      createEngine({
        options: GatewayOptions.parse({ enable_kv_rolling_limiter: true, kv_failure_mode: mode, kv_deadline_ms: 50 }),
        clock: new ManualClock(T0),
        config: () => cfg,
        redis: client,
        onStoreError: (e) => errors.push(e),
      });
    const open = mk('open');
    const closed = mk('closed');
    let t = performance.now();
    const a = await open.check({ api: api('d'), method: 'GET', path: '/', keyHash: 'k', session });
    const openMs = performance.now() - t;
    expect(a.kind).toBe('allow');
    expect(errors).toHaveLength(3); // API limit, key limit, quota: each one deadline
    expect(errors.every((e) => e instanceof StoreDeadlineError)).toBe(true);
    expect(openMs).toBeGreaterThanOrEqual(3 * 45);
    expect(openMs).toBeLessThan(3 * 50 + 1000); // three sequential deadlines, not a hang (slack for a loaded machine)
    t = performance.now();
    const b = await closed.check({ api: api('d'), method: 'GET', path: '/', keyHash: 'k', session });
    expect(b.kind).toBe('unavailable');
    expect(performance.now() - t).toBeLessThan(50 + 1000);
    client.disconnect();
  });

  test('the default 1 s deadline: the first decision waits it out once, the following ones get the short deadline', async () => {
    const client = createStoreClient(`redis://127.0.0.1:${port}`, { enableReadyCheck: false, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    try {
      const engine = createEngine({
        options: GatewayOptions.parse({ enable_kv_rolling_limiter: true }),
        clock: new ManualClock(T0),
        config: () => cfg,
        redis: client,
      });
      const decide = async (): Promise<number> => {
        const t = performance.now();
        expect((await engine.check({ api: api('d'), method: 'GET', path: '/', keyHash: 'k', session })).kind).toBe(
          'allow',
        );
        return performance.now() - t;
      };
      const first = await decide();
      expect(first).toBeGreaterThanOrEqual(1000 - 5); // the API limit's call waited the full second
      expect(first).toBeLessThan(1000 + 2 * 50 + 1000); // then key limit and quota: short deadlines
      for (let i = 0; i < 3; i++) expect(await decide()).toBeLessThan(3 * 50 + 500);
    } finally {
      client.disconnect();
    }
  }, 20_000);
});
