/**
 * Streams with real HTTP on loopback: an http_server input mounted in a node http server through the
 * manager's tryHandle(), http_client processors/outputs calling real receivers.
 */
import { Registry } from 'prom-client';
import { createStreamManager, type StreamManager } from '../../../streams/manager.js';
import { gateway, maxInWindow, quietLogger, receiver, sleep, until, type Gateway, type Receiver } from './helpers.js';

const API = 'events';
const LISTEN = '/ev/';

function api(streaming: unknown) {
  return [{ api_id: API, listenPath: LISTEN, streaming }];
}

describe('streams over HTTP', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function setup(streaming: unknown, drainTimeoutMs = 5000): Promise<{ mgr: StreamManager; gw: Gateway }> {
    const mgr = createStreamManager({ logger: quietLogger(), drainTimeoutMs });
    await mgr.apply(api(streaming));
    const gw = await gateway(mgr, API, LISTEN);
    cleanup.push(async () => {
      await gw.close();
      await mgr.stop();
    });
    return { mgr, gw };
  }

  async function recv(...a: Parameters<typeof receiver>): Promise<Receiver> {
    const r = await receiver(...a);
    cleanup.push(() => r.close());
    return r;
  }

  test('http_server → http_client, local {count: 20, interval: 200ms}, 100 messages at once: ≤ 20 per any 200 ms window, all arrive, in order', async () => {
    const rx = await recv();
    const { gw, mgr } = await setup({
      rate_limit_resources: [{ label: 'peer', local: { count: 20, interval: '200ms' } }],
      streams: { intake: { input: { http_server: { path: '/in' } }, output: { http_client: { url: `${rx.url}/hook`, rate_limit: 'peer' } } } },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) statuses.push((await gw.post('/ev/in', { seq: i })).status);
    expect(statuses.every((s) => s === 202)).toBe(true);
    await rx.waitFor(100);
    expect(rx.hits.map((h) => (h.body as { seq: number }).seq)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    const ts = rx.hits.map((h) => h.t);
    const gaps = ts.slice(20).map((t, i) => t - ts[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(200); // the 21st after any message comes ≥ 200 ms later
    expect(maxInWindow(ts, 200)).toBeLessThanOrEqual(20);
    // and the limiter is the bottleneck, not something slower: 100 messages need at least 4 full windows
    expect(ts[99]! - ts[0]!).toBeGreaterThanOrEqual(800);
    expect(ts[99]! - ts[0]!).toBeLessThan(3000);
    await until(() => mgr.list()[0]?.pending === 0);
    expect(mgr.list()).toEqual([{ api_id: API, stream: 'intake', input: 'http_server', output: 'http_client', pending: 0 }]);
  });

  test('a processor and the output naming the same label share one allowance', async () => {
    const rx = await recv((hit) => ({ status: 200, body: hit.path === '/enrich' ? { ...(hit.body as object), enriched: true } : { ok: true } }));
    const { gw } = await setup({
      rate_limit_resources: [{ label: 'shared', local: { count: 10, interval: '200ms' } }],
      streams: {
        s: {
          input: { http_server: {} },
          pipeline: { processors: [{ http_client: { url: `${rx.url}/enrich`, rate_limit: 'shared' } }] },
          output: { http_client: { url: `${rx.url}/sink`, rate_limit: 'shared' } },
        },
      },
    });
    for (let i = 0; i < 25; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    await rx.waitFor(50);
    const ts = rx.hits.map((h) => h.t);
    expect(maxInWindow(ts, 200)).toBeLessThanOrEqual(10);
    const sink = rx.hits.filter((h) => h.path === '/sink');
    expect(sink.map((h) => h.body)).toEqual(Array.from({ length: 25 }, (_, i) => ({ seq: i, enriched: true })));
  });

  test('two stream managers (two gateway processes) do not share a local limit', async () => {
    const rx = await recv();
    const streaming = (tag: string) => ({
      rate_limit_resources: [{ label: 'peer', local: { count: 10, interval: '500ms' } }],
      streams: { s: { input: { http_server: {} }, output: { http_client: { url: `${rx.url}/${tag}`, rate_limit: 'peer' } } } },
    });
    const a = await setup(streaming('a'));
    const b = await setup(streaming('b'));
    const start = performance.now();
    await Promise.all([a, b].map(async ({ gw }) => {
      for (let i = 0; i < 10; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    }));
    await rx.waitFor(20);
    // each instance spent its own 10 at once: 20 arrivals inside the first window
    expect(maxInWindow(rx.hits.map((h) => h.t), 500)).toBe(20);
    expect(rx.hits[19]!.t - start).toBeLessThan(500);
    expect(rx.hits.filter((h) => h.path === '/a')).toHaveLength(10);
  });

  test('the output retries a 429 after the peer\'s Retry-After, then succeeds', async () => {
    const rx = await recv((_hit, n) => (n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
    const { gw } = await setup({
      streams: { s: { input: { http_server: {} }, output: { http_client: { url: `${rx.url}/x`, backoff: { initial_interval: '10ms', max_interval: '20ms' } } } } },
    });
    expect((await gw.post('/ev/', { seq: 1 })).status).toBe(202);
    expect((await gw.post('/ev/', { seq: 2 })).status).toBe(202);
    await rx.waitFor(2);
    expect(rx.all.map((h) => (h.body as { seq: number }).seq)).toEqual([1, 1, 2]);
    // without Retry-After the backoff would have retried after 10 ms
    expect(rx.all[1]!.t - rx.all[0]!.t).toBeGreaterThanOrEqual(990);
    expect(rx.all[1]!.t - rx.all[0]!.t).toBeLessThan(1500);
  });

  test('a 5xx is retried with backoff; a 400 is given up at once (rejected, counted as failed)', async () => {
    const rx = await recv((hit, n) => {
      const seq = (hit.body as { seq: number }).seq;
      if (seq === 1) return { status: 400 };
      return n <= 3 ? { status: 503 } : { status: 200 };
    });
    const { gw, mgr } = await setup({
      streams: { s: { input: { http_server: {} }, output: { http_client: { url: `${rx.url}/x`, backoff: { initial_interval: '20ms', max_interval: '40ms' } } } } },
    });
    const reg = new Registry();
    mgr.metrics(reg);
    expect((await gw.post('/ev/', { seq: 0 })).status).toBe(202);
    expect((await gw.post('/ev/', { seq: 1 })).status).toBe(202);
    expect((await gw.post('/ev/', { seq: 2 })).status).toBe(202);
    await rx.waitFor(2);
    expect(rx.hits.map((h) => (h.body as { seq: number }).seq)).toEqual([0, 2]);
    expect(rx.all.filter((h) => (h.body as { seq: number }).seq === 1)).toHaveLength(1);
    await until(async () => (await reg.getSingleMetricAsString('gw_stream_messages_failed_total')).includes('} 1'));
    const text = await reg.metrics();
    expect(text).toContain('gw_stream_messages_in_total{api="events",stream="s"} 3');
    expect(text).toContain('gw_stream_messages_out_total{api="events",stream="s"} 2');
    expect(text).toMatch(/gw_stream_retries_total\{api="events",stream="s",component="output.http_client"\} 3/);
    expect(text).toContain('gw_stream_output_seconds_count{api="events",stream="s"} 2');
  });

  test('a saturated pipeline answers 503 with Retry-After; accepted messages are delivered', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const rx = await recv(async () => {
      await gate;
      return { status: 200 };
    });
    const { gw } = await setup({
      streams: { s: { input: { http_server: { max_pending: 2 } }, output: { http_client: { url: `${rx.url}/x`, timeout: '10s' } } } },
    });
    const r1 = await gw.post('/ev/', { seq: 1 }); // taken by the output (in flight)
    await sleep(20);
    const r2 = await gw.post('/ev/', { seq: 2 });
    const r3 = await gw.post('/ev/', { seq: 3 });
    const r4 = await gw.post('/ev/', { seq: 4 });
    expect([r1.status, r2.status, r3.status, r4.status]).toEqual([202, 202, 202, 503]);
    expect(r4.retryAfter).toBe('1');
    expect(r4.json).toEqual({ error: 'Stream buffer full' });
    release();
    await rx.waitFor(3);
    expect(rx.hits.map((h) => (h.body as { seq: number }).seq)).toEqual([1, 2, 3]);
  });

  test('tryHandle: only POST to a stream input path is taken; anything else is left to the proxy', async () => {
    const { gw, mgr } = await setup({ streams: { s: { input: { http_server: { path: '/in' } }, output: { drop: {} } } } });
    expect((await gw.post('/ev/in/', { a: 1 })).status).toBe(202);
    expect((await gw.post('/ev/other', { a: 1 })).status).toBe(404);
    const r = await fetch(`${gw.url}/ev/in`);
    expect(r.status).toBe(404);
    await r.text();
    expect(mgr.tryHandle('unknown-api', '/in', { method: 'POST' } as never, {} as never)).toBe(false);
  });

  test('hot reload drains the old pipeline before the new one runs; a bad config is logged and skipped; removal stops the stream', async () => {
    const rxOld = await recv(async () => {
      await sleep(30);
      return { status: 200 };
    });
    const rxNew = await recv();
    const cfg = (url: string) => ({ streams: { s: { input: { http_server: {} }, output: { http_client: { url } } } } });
    const { gw, mgr } = await setup(cfg(`${rxOld.url}/old`));
    for (let i = 0; i < 10; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    const reload = mgr.apply(api(cfg(`${rxNew.url}/new`)));
    for (let i = 10; i < 15; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    await reload;
    await rxNew.waitFor(5);
    // every message accepted by the old pipeline went to the old target, before the new one started
    expect(rxOld.hits.map((h) => (h.body as { seq: number }).seq)).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(rxNew.hits.map((h) => (h.body as { seq: number }).seq)).toEqual([10, 11, 12, 13, 14]);
    expect(rxNew.hits[0]!.t).toBeGreaterThan(rxOld.hits[9]!.t);

    // a bad config (unknown label) is refused without crashing; the running stream stays
    await mgr.apply(api({ streams: { s: { input: { http_server: {} }, output: { http_client: { url: rxNew.url, rate_limit: 'nope' } } } } }));
    expect((await gw.post('/ev/', { seq: 15 })).status).toBe(202);
    await rxNew.waitFor(6);

    // no streaming any more: the path goes back to the proxy
    await mgr.apply(api(undefined));
    expect((await gw.post('/ev/', { seq: 16 })).status).toBe(404);
    expect(mgr.list()).toEqual([]);
  });
});
