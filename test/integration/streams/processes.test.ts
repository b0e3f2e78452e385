/**
 * Streams inside real `gw standalone` processes (spawned from dist/cli/gw.js), real receivers, real Redis:
 * - two gw processes running the same stream each get their own local count;
 * - redis_streams → http_client with a receiver failing 50% with 503, the process killed (SIGKILL)
 *   mid-way and restarted: no message is lost, and at most the one in flight at the kill is repeated;
 * - a manifest change reconfigures a running stream: the old pipeline drains first, order is kept;
 * - the OAS form x-gw-streaming runs like spec.streaming; the per-stream metrics are on /metrics.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { request } from 'undici';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';
import { maxInWindow, receiver, sleep, until, type Receiver } from './helpers.js';

async function post(gw: Standalone, path: string, body: unknown): Promise<number> {
  const r = await request(`${gw.gateway}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  await r.body.dump();
  return r.statusCode;
}

async function metrics(gw: Standalone): Promise<string> {
  const r = await request(`${gw.admin}/metrics`);
  return r.body.text();
}

function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : NaN;
}

describe('streams in gw processes', () => {
  const stops: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
  });

  async function recv(...a: Parameters<typeof receiver>): Promise<Receiver> {
    const r = await receiver(...a);
    stops.push(() => r.close());
    return r;
  }

  async function gwOn(dir: string, args: string[] = [], env: Record<string, string> = {}): Promise<Standalone> {
    const gw = await startStandalone(dir, args, env);
    stops.push(() => gw.stop());
    return gw;
  }

  function dirWith(files: Record<string, string>): string {
    const dir = tempDir('gw-streams-');
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
    stops.push(async () => cleanup(dir));
    return dir;
  }

  test('two gw processes running the same stream each get their own count; the OAS form x-gw-streaming runs too; metrics per stream', async () => {
    const rx = await recv();
    const dir = dirWith({
      'pair.yaml': `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: pair}
spec:
  use_keyless: true
  proxy: {listen_path: /pair/}
  streaming:
    rate_limit_resources: [{label: peer, local: {count: 5, interval: 3s}}]
    streams:
      s:
        input: {http_server: {path: /in}}
        output: {http_client: {url: '${rx.url}/pair', rate_limit: peer, max_in_flight: 5}}
`,
      'oas.yaml': `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: oas-events}
spec:
  oas:
    openapi: 3.0.3
    paths: {}
    x-gw-api-gateway:
      info: {id: oas-events}
      server: {listenPath: {value: /oas/}, authentication: {enabled: false}}
    x-gw-streaming:
      rate_limit_resources: [{label: hook}]
      streams:
        intake:
          input: {http_server: {path: /in}}
          pipeline: {processors: [{mapping: {set: {via: oas}}}]}
          output: {http_client: {url: '${rx.url}/oas', rate_limit: hook}}
`,
    });
    const [a, b] = await Promise.all([gwOn(dir), gwOn(dir)]);
    const sent = await Promise.all(
      [a, b].flatMap((gw, g) =>
        Array.from({ length: 6 }, (_, i) => post(gw, '/pair/in', { from: g === 0 ? 'a' : 'b', i })),
      ),
    );
    expect(sent).toEqual(Array(12).fill(202));
    await rx.waitFor(12, 30_000);
    const from = (who: string) => rx.hits.filter((h) => (h.body as { from: string }).from === who).map((h) => h.t);
    for (const who of ['a', 'b']) {
      expect(from(who)).toHaveLength(6);
      expect(maxInWindow(from(who), 3000)).toBeLessThanOrEqual(5); // each process holds its own limit
      expect(from(who)[5]! - from(who)[0]!).toBeGreaterThanOrEqual(3000); // its 6th waited for a slot
    }
    expect(
      maxInWindow(
        rx.hits.map((h) => h.t),
        3000,
      ),
    ).toBe(10); // 5 + 5: the processes share nothing

    // per-stream metrics on each process's /metrics
    for (const gw of [a, b]) {
      const m = await metrics(gw);
      expect(metricValue(m, 'gw_stream_messages_in_total{api="pair",stream="s"}')).toBe(6);
      expect(metricValue(m, 'gw_stream_messages_out_total{api="pair",stream="s"}')).toBe(6);
      expect(metricValue(m, 'gw_stream_messages_failed_total{api="pair",stream="s"}') || 0).toBe(0);
      expect(
        metricValue(m, 'gw_stream_rate_limit_waits_total{api="pair",stream="s",label="peer"}'),
      ).toBeGreaterThanOrEqual(1);
      expect(metricValue(m, 'gw_stream_output_seconds_count{api="pair",stream="s"}')).toBe(6);
    }

    // the OAS form
    expect(await post(a, '/oas/in', { n: 1 })).toBe(202);
    await until(() => rx.hits.some((h) => h.path === '/oas'), 10_000, 'the OAS stream delivery');
    expect(rx.hits.find((h) => h.path === '/oas')!.body).toEqual({ n: 1, via: 'oas' });
  }, 60_000);

  test('the intake sits behind authentication and the API-level limit: 401 without a key, 429 over the API rate', async () => {
    const rx = await recv();
    const stream = `  streaming:
    streams:
      s:
        input: {http_server: {path: /in}}
        output: {http_client: {url: '${rx.url}/x'}}
`;
    const dir = dirWith({
      'limited.yaml': `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: limited}
spec:
  use_keyless: true
  proxy: {listen_path: /limited/}
  global_rate_limit: {rate: 2, per: 60}
${stream}`,
      'keyed.yaml': `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: keyed}
spec:
  proxy: {listen_path: /keyed/}
${stream}`,
    });
    const gw = await gwOn(dir);
    expect([
      await post(gw, '/limited/in', 1),
      await post(gw, '/limited/in', 2),
      await post(gw, '/limited/in', 3),
    ]).toEqual([202, 202, 429]);
    expect(await post(gw, '/keyed/in', 1)).toBe(401);
    await rx.waitFor(2);
    await sleep(100);
    expect(rx.hits.map((h) => h.body)).toEqual([1, 2]);
  });

  describe('redis_streams', () => {
    let redis: Redis;
    beforeEach(async () => {
      redis = await freshRedis();
    });
    afterEach(() => redis.disconnect());

    test('receiver failing 50% with 503, gw killed (SIGKILL) mid-way and restarted: every message arrives, none lost', async () => {
      const rx = await recv((_h, n) => ({ status: n % 2 === 1 ? 503 : 200 }));
      const TOTAL = 30;
      for (let n = 0; n < TOTAL; n++) await redis.xadd('jobs', '*', 'body', JSON.stringify({ n }));
      const dir = dirWith({
        'queue.yaml': `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: queue}
spec:
  use_keyless: true
  proxy: {listen_path: /queue/}
  streaming:
    rate_limit_resources: [{label: peer, local: {count: 10, interval: 1s}}]
    streams:
      jobs:
        input: {redis_streams: {stream: jobs, group: gw, consumer: pod-a}}
        output:
          http_client:
            url: '${rx.url}/deliver'
            rate_limit: peer
            backoff: {initial_interval: 20ms, max_interval: 100ms}
`,
      });
      const first = await startStandalone(dir, ['--redis', redisUrl()]);
      await until(() => rx.hits.length >= 6, 30_000, '6 deliveries before the kill');
      const exited = new Promise((r) => first.proc.once('exit', r));
      first.proc.kill('SIGKILL');
      await exited;
      const before = rx.hits.length;
      expect(before).toBeLessThan(TOTAL); // really mid-way

      await gwOn(dir, ['--redis', redisUrl()]);
      const delivered = () => new Set(rx.hits.map((h) => (h.body as { n: number }).n));
      await until(() => delivered().size === TOTAL, 60_000, `all ${TOTAL} delivered`);
      await until(
        async () => Number(((await redis.xpending('jobs', 'gw')) as [number])[0]) === 0,
        10_000,
        'nothing pending',
      );
      expect([...delivered()].sort((x, y) => x - y)).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
      // at-least-once: only an entry whose 2xx came back but whose XACK the kill prevented can repeat
      expect(rx.hits.length - TOTAL).toBeLessThanOrEqual(1);
      // in order per run (single in-flight): each run delivers ascending, a repeat only at the seam
      const seqs = rx.hits.map((h) => (h.body as { n: number }).n);
      expect(seqs.slice(0, before)).toEqual(Array.from({ length: before }, (_, i) => i));
      expect(rx.all.length).toBeGreaterThanOrEqual(2 * TOTAL - 1); // the 503s really happened and were retried
    }, 120_000);
  });

  test('a manifest change reconfigures the running stream: the old pipeline drains what it accepted, then the new one runs', async () => {
    const rx = await recv();
    const manifest = (path: string) => `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: hot}
spec:
  use_keyless: true
  proxy: {listen_path: /hot/}
  streaming:
    rate_limit_resources: [{label: peer, local: {count: 2, interval: 500ms}}]
    streams:
      s:
        input: {http_server: {path: /in}}
        output: {http_client: {url: '${rx.url}${path}', rate_limit: peer}}
`;
    const dir = dirWith({ 'hot.yaml': manifest('/v1') });
    const gw = await gwOn(dir, [], { GW_LOG_LEVEL: 'info' });
    for (let i = 0; i < 6; i++) expect(await post(gw, '/hot/in', { i })).toBe(202);
    writeFileSync(join(dir, 'hot.yaml'), manifest('/v2'));
    await until(() => gw.output().includes('"action":"reconfigure"'), 10_000, 'the reload');
    for (let i = 6; i < 8; i++) expect(await post(gw, '/hot/in', { i })).toBe(202);
    await rx.waitFor(8, 30_000);
    await sleep(200);
    const at = (p: string) => rx.hits.filter((h) => h.path === p);
    expect(at('/v1').map((h) => (h.body as { i: number }).i)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(at('/v2').map((h) => (h.body as { i: number }).i)).toEqual([6, 7]);
    expect(at('/v2')[0]!.t).toBeGreaterThan(at('/v1')[5]!.t);
    expect(rx.hits).toHaveLength(8);
  }, 60_000);
});
