/**
 * redis_streams → http_client against the real redis-server of the test run: entries are acknowledged
 * only after the output succeeded, so a dead receiver or a stopped gateway loses nothing.
 */
import type { Redis } from 'ioredis';
import { createStreamManager, type StreamManager } from '../../../streams/manager.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';
import { quietLogger, receiver, sleep, until, type Receiver, type ReplyFn } from './helpers.js';

const API = 'queue';

function streaming(url: string, extra: Record<string, unknown> = {}) {
  return {
    rate_limit_resources: [{ label: 'peer', local: { count: 50, interval: '100ms' } }],
    streams: {
      q: {
        input: { redis_streams: { stream: 'jobs', group: 'gw', consumer: 'c1', claim_idle: '2s', ...extra } },
        output: {
          http_client: {
            url: `${url}/deliver`,
            rate_limit: 'peer',
            timeout: '1s',
            backoff: { initial_interval: '20ms', max_interval: '100ms' },
          },
        },
      },
    },
  };
}

describe('redis_streams input', () => {
  let redis: Redis;
  const cleanup: Array<() => Promise<void>> = [];

  beforeEach(async () => {
    redis = await freshRedis();
  });
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
    redis.disconnect();
  });

  async function manager(
    url: string,
    drainTimeoutMs = 3000,
    extra: Record<string, unknown> = {},
  ): Promise<StreamManager> {
    const mgr = createStreamManager({ logger: quietLogger(), redisUrl: redisUrl(), drainTimeoutMs });
    await mgr.apply([{ api_id: API, listenPath: '/q/', streaming: streaming(url, extra) }]);
    let stopped = false;
    cleanup.push(async () => {
      if (!stopped) await mgr.stop();
    });
    return {
      ...mgr,
      async stop() {
        stopped = true;
        await mgr.stop();
      },
    };
  }

  async function recv(reply?: ReplyFn, port?: number): Promise<Receiver> {
    const r = await receiver(reply, port);
    cleanup.push(() => r.close());
    return r;
  }

  const add = async (from: number, to: number) => {
    for (let n = from; n < to; n++) await redis.xadd('jobs', '*', 'body', JSON.stringify({ n }));
  };
  const pendingCount = async (): Promise<number> => {
    try {
      const r = (await redis.xpending('jobs', 'gw')) as [number, ...unknown[]];
      return Number(r[0]);
    } catch (e) {
      if (String(e).includes('NOGROUP')) return -1; // the gateway has not created its group yet
      throw e;
    }
  };
  const seqs = (rx: Receiver) => rx.hits.map((h) => (h.body as { n: number }).n);

  test('acks only after the output succeeded: with the receiver down entries stay pending, then arrive in order', async () => {
    const probe = await receiver();
    const port = probe.port;
    await probe.close(); // nobody listens on this port for now
    await add(0, 10);
    await manager(`http://127.0.0.1:${port}`);
    await until(async () => (await pendingCount()) === 10, 5000, '10 pending entries');
    await sleep(300); // retrying against a closed port: still nothing acknowledged
    expect(await pendingCount()).toBe(10);

    const rx = await recv(undefined, port);
    await rx.waitFor(10);
    await until(async () => (await pendingCount()) === 0, 5000, 'all acknowledged');
    expect(seqs(rx)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  test('a receiver failing 50% with 503: every message is delivered exactly once', async () => {
    const rx = await recv((_h, n) => ({ status: n % 2 === 1 ? 503 : 200 }));
    await add(0, 20);
    await manager(rx.url);
    await rx.waitFor(20);
    await until(async () => (await pendingCount()) === 0, 5000, 'all acknowledged');
    await sleep(200);
    expect(seqs(rx)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(rx.all.length).toBe(40);
  });

  test('stopping the gateway mid-way loses nothing: the next run re-reads its pending entries', async () => {
    const down = await recv(() => ({ status: 503 }));
    await add(0, 5);
    const first = await manager(down.url, 200);
    await until(async () => (await pendingCount()) === 5, 5000, '5 pending entries');
    await first.stop(); // drain deadline passes: the in-flight message is aborted, nothing acked
    expect(await pendingCount()).toBe(5);
    await add(5, 8); // arrives while no gateway runs

    const rx = await recv();
    await manager(rx.url);
    await rx.waitFor(8);
    await until(async () => (await pendingCount()) === 0, 5000, 'all acknowledged');
    expect(seqs(rx)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  test('entries left pending by a dead consumer are claimed after claim_idle', async () => {
    await redis.xgroup('CREATE', 'jobs', 'gw', '0', 'MKSTREAM');
    await add(0, 3);
    await redis.xreadgroup('GROUP', 'gw', 'dead-pod', 'COUNT', 10, 'STREAMS', 'jobs', '>'); // read, never acked
    const rx = await recv();
    await manager(rx.url, 3000, { claim_idle: '300ms' });
    await rx.waitFor(3, 5000);
    await until(async () => (await pendingCount()) === 0, 5000, 'all acknowledged');
    expect(seqs(rx).sort()).toEqual([0, 1, 2]);
  });
});
