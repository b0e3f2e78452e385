/**
 * Streams with real HTTP on loopback: an http_server input mounted in a node http server through the
 * manager's tryHandle(), http_client processors/outputs calling real receivers.
 */
import { readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { getPriority } from 'node:os';
import { BACKGROUND_NICE } from '../../../lib/background-thread.js';
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

  async function setup(
    streaming: unknown,
    drainTimeoutMs = 5000,
    bufferBytes?: number,
  ): Promise<{ mgr: StreamManager; gw: Gateway }> {
    const mgr = createStreamManager({ logger: quietLogger(), drainTimeoutMs, bufferBytes });
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

  /** A receiver that holds every request until release(): messages stay in flight, the buffer fills. */
  async function gatedRecv(): Promise<{ rx: Receiver; release: () => void }> {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const rx = await recv(async () => {
      await gate;
      return { status: 200 };
    });
    return { rx, release };
  }

  /** A stream whose http_server input has `input`'s options, delivering to a gatedRecv() receiver. */
  async function gatedStream(
    input: Record<string, unknown>,
  ): Promise<{ rx: Receiver; release: () => void; gw: Gateway }> {
    const { rx, release } = await gatedRecv();
    const { gw } = await setup({
      streams: {
        s: { input: { http_server: input }, output: { http_client: { url: `${rx.url}/x`, timeout: '10s' } } },
      },
    });
    return { rx, release, gw };
  }

  test('http_server → http_client, local {count: 10, interval: 1s}, 100 messages at once: ≤ 10 in any 1 s window at the receiver, all arrive, in order (single in-flight)', async () => {
    const rx = await recv();
    const { gw, mgr } = await setup({
      rate_limit_resources: [{ label: 'peer', local: { count: 10, interval: '1s' } }],
      streams: {
        intake: {
          input: { http_server: { path: '/in' } },
          output: { http_client: { url: `${rx.url}/hook`, rate_limit: 'peer' } },
        },
      },
    });
    const reg = new Registry();
    mgr.metrics(reg);
    // all 100 at once (concurrent POSTs): the acceptance order is the order of the ids' sequence numbers
    const accepted = await Promise.all(Array.from({ length: 100 }, (_, i) => gw.post('/ev/in', { n: i })));
    expect(accepted.map((r) => r.status)).toEqual(Array(100).fill(202));
    const seqOf = (id: string) => parseInt(id.split('-').pop()!, 36);
    const order = accepted
      .map((r, i) => ({ n: i, seq: seqOf((r.json as { id: string }).id) }))
      .sort((a, b) => a.seq - b.seq)
      .map((x) => x.n);
    await rx.waitFor(100, 60_000);
    // in order: exactly the acceptance order, each message once
    expect(rx.hits.map((h) => (h.body as { n: number }).n)).toEqual(order);
    expect(rx.all).toHaveLength(100);
    // the rule, measured with the receiver's timestamps: never more than 10 in any window of 1 s
    const ts = rx.hits.map((h) => h.t);
    expect(maxInWindow(ts, 1000)).toBeLessThanOrEqual(10);
    for (let i = 10; i < ts.length; i++) expect(ts[i]! - ts[i - 10]!).toBeGreaterThanOrEqual(1000);
    // the pipeline waited instead of dropping: among any 10 consecutive accesses after the first 10 at
    // least one had to wait (10 loopback round trips take far less than 1 s), so ≥ 9 waits were counted
    const waits = await reg.getSingleMetricAsString('gw_stream_rate_limit_waits_total');
    const waited = Number(/label="peer"\} (\d+)/.exec(waits)?.[1] ?? 0);
    expect(waited).toBeGreaterThanOrEqual(9);
    expect(waited).toBeLessThanOrEqual(90);
    await until(() => mgr.list()[0]?.pending === 0);
    expect(mgr.list()).toEqual([
      { api_id: API, stream: 'intake', input: 'http_server', output: 'http_client', pending: 0 },
    ]);
    const text = await reg.metrics();
    expect(text).toContain('gw_stream_messages_in_total{api="events",stream="intake"} 100');
    expect(text).toContain('gw_stream_messages_out_total{api="events",stream="intake"} 100');
    expect(text).toContain('gw_stream_output_seconds_count{api="events",stream="intake"} 100');
  }, 90_000);

  test('max_in_flight 4 with {count: 20, interval: 200ms}: the window still holds, and all arrive', async () => {
    const rx = await recv(async () => {
      await sleep(5);
      return { status: 200 };
    });
    const { gw } = await setup({
      rate_limit_resources: [{ label: 'peer', local: { count: 20, interval: '200ms' } }],
      streams: {
        intake: {
          input: { http_server: { path: '/in' } },
          output: { http_client: { url: `${rx.url}/hook`, rate_limit: 'peer', max_in_flight: 4 } },
        },
      },
    });
    const statuses = await Promise.all(Array.from({ length: 100 }, (_, i) => gw.post('/ev/in', { seq: i })));
    expect(statuses.every((s) => s.status === 202)).toBe(true);
    await rx.waitFor(100, 30_000);
    expect(new Set(rx.hits.map((h) => (h.body as { seq: number }).seq)).size).toBe(100);
    expect(
      maxInWindow(
        rx.hits.map((h) => h.t),
        200,
      ),
    ).toBeLessThanOrEqual(20);
  });

  test('a processor and the output naming the same label share one allowance', async () => {
    const rx = await recv((hit) => ({
      status: 200,
      body: hit.path === '/enrich' ? { ...(hit.body as object), enriched: true } : { ok: true },
    }));
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

  test('http_client processor with result_field enriches the message; mapping runs before it', async () => {
    const rx = await recv((hit) =>
      hit.path === '/lookup' ? { status: 200, body: { tier: 'gold', asked: hit.body } } : { status: 200 },
    );
    const { gw } = await setup({
      streams: {
        s: {
          input: { http_server: {} },
          pipeline: {
            processors: [
              { mapping: { move: { uid: 'user.id' } } },
              { http_client: { url: `${rx.url}/lookup`, result_field: 'customer' } },
            ],
          },
          output: { http_client: { url: `${rx.url}/sink` } },
        },
      },
    });
    expect((await gw.post('/ev/', { uid: 'u1' })).status).toBe(202);
    await rx.waitFor(2);
    expect(rx.hits.map((h) => [h.path, h.body])).toEqual([
      ['/lookup', { user: { id: 'u1' } }],
      ['/sink', { user: { id: 'u1' }, customer: { tier: 'gold', asked: { user: { id: 'u1' } } } }],
    ]);
  });

  test('two stream managers (as in two gateway processes) do not share a local limit', async () => {
    const rx = await recv();
    const streaming = (tag: string) => ({
      rate_limit_resources: [{ label: 'peer', local: { count: 10, interval: '5s' } }],
      streams: {
        s: {
          input: { http_server: {} },
          output: { http_client: { url: `${rx.url}/${tag}`, rate_limit: 'peer', max_in_flight: 10 } },
        },
      },
    });
    const a = await setup(streaming('a'));
    const b = await setup(streaming('b'));
    await Promise.all(
      [a, b].map(async ({ gw }) => {
        for (let i = 0; i < 11; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
      }),
    );
    await rx.waitFor(22, 30_000);
    const at = (tag: string) => rx.hits.filter((h) => h.path === `/${tag}`).map((h) => h.t);
    // each instance keeps its own count: ≤ 10 of its own in any window, its 11th waits a whole window
    for (const tag of ['a', 'b']) {
      expect(at(tag)).toHaveLength(11);
      expect(maxInWindow(at(tag), 5000)).toBeLessThanOrEqual(10);
      expect(at(tag)[10]! - at(tag)[0]!).toBeGreaterThanOrEqual(5000);
    }
    // but the two together spent 20 in the first window: nothing is shared between instances
    expect(
      maxInWindow(
        rx.hits.map((h) => h.t),
        5000,
      ),
    ).toBe(20);
  });

  test("the output retries a 429 after the peer's Retry-After, then succeeds", async () => {
    const rx = await recv((_hit, n) => (n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
    const { gw } = await setup({
      streams: {
        s: {
          input: { http_server: {} },
          output: { http_client: { url: `${rx.url}/x`, backoff: { initial_interval: '10ms', max_interval: '20ms' } } },
        },
      },
    });
    expect((await gw.post('/ev/', { seq: 1 })).status).toBe(202);
    expect((await gw.post('/ev/', { seq: 2 })).status).toBe(202);
    await rx.waitFor(2);
    expect(rx.all.map((h) => (h.body as { seq: number }).seq)).toEqual([1, 1, 2]);
    // without Retry-After the backoff would have retried after 10 ms
    expect(rx.all[1]!.t - rx.all[0]!.t).toBeGreaterThanOrEqual(990);
    expect(rx.all[1]!.t - rx.all[0]!.t).toBeLessThan(5000);
  });

  test('a 5xx is retried with backoff; a 400 is given up at once (rejected, counted as failed)', async () => {
    const rx = await recv((hit, n) => {
      const seq = (hit.body as { seq: number }).seq;
      if (seq === 1) return { status: 400 };
      return n <= 3 ? { status: 503 } : { status: 200 };
    });
    const { gw, mgr } = await setup({
      streams: {
        s: {
          input: { http_server: {} },
          output: { http_client: { url: `${rx.url}/x`, backoff: { initial_interval: '20ms', max_interval: '40ms' } } },
        },
      },
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
    // the receiver records a hit before its answer reaches the output, which counts the delivery after it
    await until(async () => (await reg.getSingleMetricAsString('gw_stream_messages_out_total')).includes('} 2'));
    const text = await reg.metrics();
    expect(text).toContain('gw_stream_messages_in_total{api="events",stream="s"} 3');
    expect(text).toContain('gw_stream_messages_out_total{api="events",stream="s"} 2');
    expect(text).toMatch(/gw_stream_retries_total\{api="events",stream="s",component="output.http_client"\} 3/);
    expect(text).toContain('gw_stream_output_seconds_count{api="events",stream="s"} 2');
  });

  test('max_retries: after max_retries retries the message fails (counted) and the next one goes on', async () => {
    const rx = await recv((hit) => ((hit.body as { seq: number }).seq === 0 ? { status: 503 } : { status: 200 }));
    const { gw, mgr } = await setup({
      streams: {
        s: {
          input: { http_server: {} },
          output: {
            http_client: {
              url: `${rx.url}/x`,
              max_retries: 2,
              backoff: { initial_interval: '10ms', max_interval: '20ms' },
            },
          },
        },
      },
    });
    const reg = new Registry();
    mgr.metrics(reg);
    expect((await gw.post('/ev/', { seq: 0 })).status).toBe(202);
    expect((await gw.post('/ev/', { seq: 1 })).status).toBe(202);
    await rx.waitFor(1);
    expect(rx.all.map((h) => (h.body as { seq: number }).seq)).toEqual([0, 0, 0, 1]); // 1 attempt + 2 retries
    await until(async () => (await reg.getSingleMetricAsString('gw_stream_messages_failed_total')).includes('} 1'));
    expect(await reg.getSingleMetricAsString('gw_stream_retries_total')).toContain('component="output.http_client"} 2');
  });

  test('a saturated pipeline answers 503 with Retry-After; accepted messages are delivered', async () => {
    const { rx, release, gw } = await gatedStream({ max_pending: 2 });
    const r1 = await gw.post('/ev/', { seq: 1 }); // taken by the output (in flight)
    await until(() => rx.all.length === 1, 10_000, 'message 1 in flight at the receiver'); // not a fixed sleep: robust under load
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

  test('the buffer is bounded in bytes: per stream (max_pending_bytes) and for the whole process; an empty buffer takes one body of any size', async () => {
    const { rx, release } = await gatedRecv();
    const out = { http_client: { url: `${rx.url}/x`, timeout: '10s' } };
    const { gw } = await setup(
      {
        streams: {
          a: { input: { http_server: { path: '/a', max_pending_bytes: 2500 } }, output: out },
          b: { input: { http_server: { path: '/b' } }, output: out },
        },
      },
      5000,
      4100,
    );
    const kb = (n: number) => ({ pad: 'x'.repeat(988), n }); // 1004 bytes of JSON
    expect((await gw.post('/ev/a', kb(0))).status).toBe(202); // taken by a's output (in flight)
    await until(() => rx.all.length === 1, 10_000, 'a: message 0 in flight at the receiver');
    const a = [];
    for (let i = 1; i <= 3; i++) a.push((await gw.post('/ev/a', kb(i))).status);
    expect(a).toEqual([202, 202, 503]); // 2008 bytes wait; a third would make 3012 > 2500
    expect((await gw.post('/ev/b', kb(0))).status).toBe(202); // taken by b's output
    await until(() => rx.all.length === 2, 10_000, 'b: message 0 in flight at the receiver');
    const b = [];
    for (let i = 1; i <= 3; i++) b.push((await gw.post('/ev/b', kb(i))).status);
    expect(b).toEqual([202, 202, 503]); // the process: 2008 (a) + 2008 (b) ≤ 4100; one more would be 5020
    release();
    await rx.waitFor(6);
  });

  test('a body whose declared content-length the buffer has no room for is answered 503 before it is sent (not read, kept or scanned)', async () => {
    const { rx, release, gw } = await gatedStream({ max_pending_bytes: 2500 });
    const kb = (n: number) => ({ pad: 'x'.repeat(988), n }); // 1004 bytes of JSON
    expect((await gw.post('/ev/', kb(0))).status).toBe(202); // in flight at the receiver
    await until(() => rx.all.length === 1, 10_000, 'message 0 in flight at the receiver');
    expect((await gw.post('/ev/', kb(1))).status).toBe(202); // 1004 bytes wait
    // the headers of a 1 MB POST and none of its body: the answer comes before any byte of it
    const { hostname, port } = new URL(gw.url);
    const sock = connect(Number(port), hostname);
    let answer = '';
    sock.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    sock.write(`POST /ev/ HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n`);
    await until(() => answer.includes('\r\n\r\n'), 5000, 'an answer before the body');
    sock.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.toLowerCase()).toContain('retry-after: 1');
    release();
    await rx.waitFor(2);
  });

  test('room is held for a body while it is read: a second body that would not fit beside it is answered 503 before it is sent; a body given up frees its room', async () => {
    const { rx, release, gw } = await gatedStream({ max_pending_bytes: 2500 });
    const kb = (n: number) => JSON.stringify({ pad: 'x'.repeat(988), n }); // 1004 bytes of JSON
    expect((await gw.post('/ev/', JSON.parse(kb(0)))).status).toBe(202); // in flight at the receiver
    await until(() => rx.all.length === 1, 10_000, 'message 0 in flight at the receiver');
    expect((await gw.post('/ev/', JSON.parse(kb(1)))).status).toBe(202); // 1004 bytes wait
    const { hostname, port } = new URL(gw.url);
    /** A POST of 1004 declared bytes whose body is not sent yet: its answer as it arrives. */
    const open = () => {
      const sock = connect(Number(port), hostname);
      const r = { sock, answer: '' };
      sock.on('data', (d: Buffer) => (r.answer += d.toString('latin1')));
      sock.write(`POST /ev/ HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1004\r\n\r\n`);
      return r;
    };
    // 1004 waiting + 1004 being read leave no room for another 1004 within 2500: of two bodies whose
    // headers arrive together, one holds the room (no answer while its body is not sent), the other is 503
    const both = [open(), open()];
    await until(() => both.some((x) => x.answer.includes('\r\n\r\n')), 5000, 'an answer before any body is sent');
    await sleep(300);
    const refused = both.filter((x) => x.answer !== '');
    expect(refused).toHaveLength(1);
    expect(refused[0]!.answer).toMatch(/^HTTP\/1\.1 503 /);
    refused[0]!.sock.destroy();
    const held = both.find((x) => x.answer === '')!;
    // the body being read is given up mid-way: its room is free again, and a whole body of its size is taken
    held.sock.write(kb(2).slice(0, 100));
    await sleep(100);
    held.sock.destroy();
    await until(
      async () => (await gw.post('/ev/', JSON.parse(kb(3)))).status === 202,
      5000,
      'room freed by the body given up',
    );
    release();
    await rx.waitFor(3);
  });

  test('nesting past 64 levels that begins after the first 64 KiB is found by the scan in the body thread: 400', async () => {
    const rx = await recv();
    const { gw } = await setup({
      streams: { s: { input: { http_server: {} }, output: { http_client: { url: `${rx.url}/x` } } } },
    });
    const pad = 'x'.repeat(70_000);
    const late = `{"pad":"${pad}","deep":${'['.repeat(64)}${']'.repeat(64)}}`; // 65 levels, the object included
    expect((await gw.post('/ev/', JSON.parse(late) as unknown)).status).toBe(400);
    const fine = { pad, deep: JSON.parse(`${'['.repeat(63)}${']'.repeat(63)}`) as unknown }; // 64 levels
    expect((await gw.post('/ev/', fine)).status).toBe(202);
    await rx.waitFor(1);
    expect(rx.hits[0]!.body).toEqual(fine);
  });

  test('the body thread runs at background priority (Linux): a large body is scanned on a thread at BACKGROUND_NICE', async () => {
    const rx = await recv();
    const { gw } = await setup({
      streams: { s: { input: { http_server: {} }, output: { http_client: { url: `${rx.url}/x` } } } },
    });
    expect((await gw.post('/ev/', { pad: 'x'.repeat(70_000) })).status).toBe(202); // past LARGE_BODY_BYTES
    await rx.waitFor(1);
    // this process's threads and their nice values: only the body thread lowers itself in a jest worker
    const nices = readdirSync('/proc/self/task').map((tid) => getPriority(Number(tid)));
    expect(nices).toContain(BACKGROUND_NICE);
    expect(getPriority()).toBeLessThan(BACKGROUND_NICE);
  });

  test('a body nested deeper than 64 levels is refused with 400 before it is parsed; 64 levels, and brackets inside strings, are accepted', async () => {
    const rx = await recv();
    const { gw } = await setup({
      streams: { s: { input: { http_server: {} }, output: { http_client: { url: `${rx.url}/x` } } } },
    });
    const raw = async (body: string) => {
      const r = await fetch(`${gw.url}/ev/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { status: r.status, json: (await r.json()) as unknown };
    };
    const deep = `{"user":{"id":${'['.repeat(500_000)}${']'.repeat(500_000)}}}`; // the 1 MB attack body
    const t0 = performance.now();
    expect(await raw(deep)).toEqual({ status: 400, json: { error: 'Message body nested deeper than 64 levels' } });
    expect(performance.now() - t0).toBeLessThan(1000);
    expect((await raw(`${'['.repeat(65)}${']'.repeat(65)}`)).status).toBe(400);
    expect((await raw(`${'['.repeat(64)}${']'.repeat(64)}`)).status).toBe(202);
    expect((await raw(JSON.stringify({ s: '['.repeat(100), q: '\\"[[[' }))).status).toBe(202);
    expect((await raw('[[[ not json'.repeat(1))).status).toBe(202); // not JSON, shallow: kept as a string
    await rx.waitFor(3);
    expect(rx.hits[0]!.body).toEqual(JSON.parse(`${'['.repeat(64)}${']'.repeat(64)}`));
    expect(rx.hits[1]!.body).toEqual({ s: '['.repeat(100), q: '\\"[[[' });
    expect(rx.hits[2]!.body).toBe('[[[ not json');
  });

  test('http_client output sends its verb and headers; a non-JSON message goes as text/plain; 413 above max_body_bytes', async () => {
    const rx = await recv();
    const { gw } = await setup({
      streams: {
        s: {
          input: { http_server: { max_body_bytes: 64 } },
          output: {
            http_client: { url: `${rx.url}/put`, verb: 'PUT', headers: { 'x-api-key': 'k1', 'x-tenant': 't' } },
          },
        },
      },
    });
    expect((await gw.post('/ev/', { a: 1 })).status).toBe(202);
    const text = await fetch(`${gw.url}/ev/`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'plain words',
    });
    expect(text.status).toBe(202);
    await text.text();
    const big = await fetch(`${gw.url}/ev/`, { method: 'POST', body: 'x'.repeat(65) });
    expect(big.status).toBe(413);
    await big.text();
    await rx.waitFor(2);
    expect(
      rx.hits.map((h) => [
        h.method,
        h.path,
        h.headers['x-api-key'],
        h.headers['x-tenant'],
        h.headers['content-type'],
        h.body,
      ]),
    ).toEqual([
      ['PUT', '/put', 'k1', 't', 'application/json', { a: 1 }],
      ['PUT', '/put', 'k1', 't', 'text/plain; charset=utf-8', 'plain words'],
    ]);
  });

  test('userinfo in the url is sent as Basic authorization (not dropped), the query as given; an explicit authorization header wins', async () => {
    const rx = await recv();
    const withCreds = (path: string) => rx.url.replace('http://', 'http://us%40er:p%3Ass@') + path + '?api_key=QK';
    const { gw } = await setup({
      streams: {
        a: { input: { http_server: { path: '/a' } }, output: { http_client: { url: withCreds('/a') } } },
        b: {
          input: { http_server: { path: '/b' } },
          output: { http_client: { url: withCreds('/b'), headers: { Authorization: 'Bearer explicit' } } },
        },
      },
    });
    expect((await gw.post('/ev/a', { n: 1 })).status).toBe(202);
    await rx.waitFor(1);
    expect((await gw.post('/ev/b', { n: 2 })).status).toBe(202);
    await rx.waitFor(2);
    expect(rx.hits.map((h) => [h.path, h.headers.authorization])).toEqual([
      ['/a?api_key=QK', `Basic ${Buffer.from('us@er:p:ss').toString('base64')}`],
      ['/b?api_key=QK', 'Bearer explicit'],
    ]);
  });

  test('tryHandle: only POST to a stream input path is taken; anything else is left to the proxy', async () => {
    const { gw, mgr } = await setup({
      streams: { s: { input: { http_server: { path: '/in' } }, output: { drop: {} } } },
    });
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
    await mgr.apply(
      api({
        streams: { s: { input: { http_server: {} }, output: { http_client: { url: rxNew.url, rate_limit: 'nope' } } } },
      }),
    );
    expect((await gw.post('/ev/', { seq: 15 })).status).toBe(202);
    await rxNew.waitFor(6);

    // no streaming any more: the path goes back to the proxy
    await mgr.apply(api(undefined));
    expect((await gw.post('/ev/', { seq: 16 })).status).toBe(404);
    expect(mgr.list()).toEqual([]);
  });

  test('a stream edited with a backlog longer than the drain deadline delivers all of it, in order; other changes do not wait for that drain; shutdown cuts it', async () => {
    const rxOld = await recv();
    const rxNew = await recv();
    const cfg = (url: string) => ({
      rate_limit_resources: [{ label: 'p', local: { count: 1, interval: '100ms' } }],
      streams: { s: { input: { http_server: {} }, output: { http_client: { url, rate_limit: 'p' } } } },
    });
    const { gw, mgr } = await setup(cfg(`${rxOld.url}/old`), 300); // a 300 ms deadline, a 1.2 s backlog
    for (let i = 0; i < 12; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    const t = Date.now();
    await mgr.apply(api(cfg(`${rxNew.url}/new`)));
    // another API's change is applied while the edited stream drains (it waited for the drain: ~10 s)
    const other = {
      api_id: 'b',
      listenPath: '/b/',
      streaming: {
        rate_limit_resources: [{ label: 'q', local: { count: 9 } }],
        streams: { s: { input: { http_server: {} }, output: { drop: {} } } },
      },
    };
    await mgr.apply([...api(cfg(`${rxNew.url}/new`)), other]);
    expect(Date.now() - t).toBeLessThan(1000);
    expect(mgr.limits().find((l) => l.api_id === 'b')?.count).toBe(9);
    for (let i = 12; i < 15; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    await rxOld.waitFor(12, 15_000);
    await rxNew.waitFor(3, 15_000);
    // nothing accepted was dropped (the deadline used to abort the backlog: 7 of 23 lost), order kept
    expect(rxOld.hits.map((h) => (h.body as { seq: number }).seq)).toEqual(Array.from({ length: 12 }, (_, i) => i));
    expect(rxNew.hits.map((h) => (h.body as { seq: number }).seq)).toEqual([12, 13, 14]);
    expect(rxNew.hits[0]!.t).toBeGreaterThan(rxOld.hits[11]!.t);

    // shutdown during such a drain: cut at the deadline, not held until the backlog is through
    for (let i = 15; i < 35; i++) expect((await gw.post('/ev/', { seq: i })).status).toBe(202);
    await mgr.apply(api(cfg(`${rxOld.url}/again`)));
    const t2 = Date.now();
    await mgr.stop();
    expect(Date.now() - t2).toBeLessThan(1500);
  }, 30_000);
});
