/**
 * `gw sidecar` processes against the real kube-apiserver and real Redis:
 *   three sidecars of one group: the DRL's leases share one allowance (the whole limit on one sidecar),
 *   a stopped one leaves the group (SIGTERM, exit 0); with the Redis sliding log they admit exactly
 *   `rate` in total;
 *   config hot reload under load: zero failed requests while the limit changes, a bad config keeps the
 *   old one, the new limit takes effect;
 *   /readyz never follows the store (200 while Redis is down; /healthz's body and gw_store_up say it), the metrics of the gateway
 *   are exported, no raw key in labels or logs, SIGTERM drains an in-flight request and exits 0.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { pino } from 'pino';
import { Redis } from 'ioredis';
import { sha256hex } from '../../lib/hash.js';
import { SMOOTHING_CHANNEL } from '../../lib/events.js';
import { RedisSessionStore } from '../../stores/sessions-redis.js';
import { startNode, stopNode, type Node } from '../harness/redis-cluster.js';
import { freshNamespace, kubeconfig } from '../helpers/kube.js';
import { tempDir } from '../helpers/standalone.js';
import { freshRedis, redisUrl } from '../helpers/redis.js';
import {
  configOf,
  eventually,
  metricsText,
  startSidecar,
  status,
  writeConfigMap,
  type Sidecar,
} from '../helpers/sidecar.js';

const RAW_KEY = 'raw-key-never-logged-0123456789';
const SMOOTH_KEY = 'smooth-key-never-logged-987654';

function apis(dRate: number): { name: string; path: string; rate: number; per: number; keyless?: boolean }[] {
  return [
    { name: 'a', path: '/a/', rate: 30, per: 60 },
    { name: 'b', path: '/b/', rate: 30, per: 60 },
    { name: 'c', path: '/c/', rate: 20, per: 60 },
    { name: 'd', path: '/d/', rate: dRate, per: 1 },
    { name: 'k', path: '/k/', rate: 100000, per: 1, keyless: false },
  ];
}

async function admitted(s: Sidecar, path: string, n: number, headers: Record<string, string> = {}): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) if ((await status(`${s.gw}${path}`, headers)) === 200) ok++;
  return ok;
}

const count = (xs: number[], x: number): number => xs.filter((y) => y === x).length;

const gauge = (text: string, name: string): number | undefined => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
};

describe('gw sidecar processes of one group', () => {
  let ns: string;
  let up: Server;
  let upstream: string;
  let redis: Redis;

  beforeAll(async () => {
    ns = await freshNamespace('sidecars');
    redis = await freshRedis();
    up = createServer((req, res) => {
      const send = (): void => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      if (req.url?.endsWith('/slow')) setTimeout(send, 1000);
      else send();
    });
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    upstream = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
    await writeConfigMap(ns, configOf(ns, apis(100000)));
  });
  afterAll(async () => {
    up?.closeAllConnections();
    up?.close();
    redis?.disconnect();
  });

  test('DRL: three sidecars share one allowance whichever takes the traffic; a stopped one leaves the group', async () => {
    const options = 'drl_threshold: 0\ndrl_notification_frequency: 0.2\n';
    const sc = await Promise.all(
      [0, 1, 2].map(() => startSidecar({ ns, upstream, redis: redisUrl(), group: 'drl', options })),
    );
    try {
      await eventually(
        async () => (await Promise.all(sc.map(metricsText))).every((t) => gauge(t, 'gw_drl_peers') === 3),
        5000,
        'three DRL peers',
      );
      // 30 per 60 s leased from one counter: the group's 30 in total (the DRL's bounds: at least 0.9 × rate,
      // at most 1.1 × rate), not 30 per sidecar (45 of the 45 sent)
      const each = await Promise.all(sc.map((s) => admitted(s, '/a/x', 15)));
      const total = each.reduce((a, b) => a + b, 0);
      expect(total).toBeGreaterThanOrEqual(27);
      expect(total).toBeLessThanOrEqual(33);
      // all the traffic on one sidecar (one client, one connection): the whole limit, not a third of it (10)
      const one = await admitted(sc[1]!, '/b/x', 40);
      expect(one).toBeGreaterThanOrEqual(27);
      expect(one).toBeLessThanOrEqual(33);
      expect(await sc[2]!.stop()).toBe(0); // graceful: deregisters from the group
      await eventually(
        async () => (await Promise.all(sc.slice(0, 2).map(metricsText))).every((t) => gauge(t, 'gw_drl_peers') === 2),
        5000,
        'two peers left',
      );
      expect(await redis.zcard(`gw:drl:{${ns}/drl}:peers`)).toBe(2);
    } finally {
      await Promise.all(sc.map((s) => s.stop()));
    }
  }, 60_000);

  test('DRL groups are per namespace: a sidecar of another namespace with the same --group does not halve the split', async () => {
    const other = await freshNamespace('sidecars-other');
    await writeConfigMap(other, configOf(other, apis(100000)));
    const options = 'drl_threshold: 0\ndrl_notification_frequency: 0.2\n';
    const sc = await Promise.all(
      [ns, other].map((n) => startSidecar({ ns: n, upstream, redis: redisUrl(), group: 'same', options })),
    );
    try {
      await new Promise((r) => setTimeout(r, 1000)); // five heartbeat periods
      expect((await Promise.all(sc.map(metricsText))).map((t) => gauge(t, 'gw_drl_peers'))).toEqual([1, 1]);
      // the whole 20 per 60 s within the DRL's bounds (18–22): no split with the other namespace (10)
      const alone = await admitted(sc[0]!, '/c/x', 25);
      expect(alone).toBeGreaterThanOrEqual(18);
      expect(alone).toBeLessThanOrEqual(22);
    } finally {
      await Promise.all(sc.map((s) => s.stop()));
    }
  }, 60_000);

  test('Redis sliding log: three sidecars admit exactly rate in total under concurrent requests', async () => {
    // a generous store deadline: the test shares two cores with builds; a missed deadline would admit (open)
    const options = 'enable_kv_rolling_limiter: true\nkv_deadline_ms: 3000\n';
    // a namespace of its own: the log counts what the DRL granted a bucket in its window, and the tests
    // above spent /c/ of `ns` with the DRL
    const logNs = await freshNamespace('sidecars-log');
    await writeConfigMap(logNs, configOf(logNs, apis(100000)));
    const sc = await Promise.all(
      [0, 1, 2].map(() => startSidecar({ ns: logNs, upstream, redis: redisUrl(), group: 'log', options })),
    );
    try {
      const codes = await Promise.all(Array.from({ length: 60 }, (_, i) => status(`${sc[i % 3]!.gw}/c/x`)));
      expect(codes.filter((c) => c === 200)).toHaveLength(20);
      expect(codes.filter((c) => c === 429)).toHaveLength(40);
    } finally {
      await Promise.all(sc.map((s) => s.stop()));
    }
  }, 60_000);

  test('config hot reload under load: zero failed requests, a bad config keeps the old one, the new limit takes effect', async () => {
    const s = await startSidecar({ ns, upstream, redis: redisUrl(), group: 'reload', options: 'drl_threshold: 0\n' });
    try {
      let stop = false;
      const codes = new Map<number, number>();
      let failures = 0;
      const worker = async (): Promise<void> => {
        while (!stop) {
          try {
            const c = await status(`${s.gw}/d/x`);
            codes.set(c, (codes.get(c) ?? 0) + 1);
          } catch {
            failures++;
          }
        }
      };
      const load = Promise.all(Array.from({ length: 8 }, worker));
      for (const rate of [200000, 150000]) {
        await writeConfigMap(ns, configOf(ns, apis(rate)));
        await new Promise((r) => setTimeout(r, 700));
      }
      await writeConfigMap(ns, '{"hash": 1, "apis": "broken"}');
      await eventually(async () => /gw_config_errors_total 1/.test(await metricsText(s)), 5000, 'bad config refused');
      await new Promise((r) => setTimeout(r, 500));
      stop = true;
      await load;
      expect(failures).toBe(0);
      expect([...codes.keys()]).toEqual([200]);
      expect(codes.get(200)!).toBeGreaterThan(50);
      expect(s.out()).toContain('config refused, keeping the previous one');
      // the limit really moves: down to 2 per second
      await writeConfigMap(ns, configOf(ns, apis(2)));
      await eventually(async () => (await status(`${s.gw}/d/x`)) === 429, 5000, 'new limit in force');
    } finally {
      await s.stop();
      await writeConfigMap(ns, configOf(ns, apis(100000)));
    }
  }, 60_000);
});

describe('gw sidecar: readiness, metrics, drain', () => {
  let ns: string;
  let node: Node;
  let up: Server;
  let upstream: string;
  let s: Sidecar;

  beforeAll(async () => {
    ns = await freshNamespace('sidecar-ops');
    node = await startNode();
    up = createServer((req, res) => {
      const send = (): void => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      if (req.url?.endsWith('/slow')) setTimeout(send, 1000);
      else send();
    });
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    upstream = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
    await writeConfigMap(ns, configOf(ns, apis(100000)));
    const store = new Redis({ port: node.port, host: '127.0.0.1' });
    const sessions = new RedisSessionStore(store, pino({ level: 'silent' }));
    await sessions.put(sha256hex(RAW_KEY), {
      namespace: ns,
      session: { rate: 1000, per: 1, quota_max: 2, quota_renewal_rate: 3600 },
    });
    await sessions.put(sha256hex(SMOOTH_KEY), {
      namespace: ns,
      session: { rate: 20, per: 60, smoothing: { enabled: true, threshold: 5, step: 5, trigger: 0.5, delay: 10 } },
    });
    store.disconnect();
    s = await startSidecar({ ns, upstream, redis: `redis://127.0.0.1:${node.port}`, group: 'ops' });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
    up?.closeAllConnections();
    up?.close();
    if (node) await stopNode(node);
  });

  test('every gateway metric is exported; no raw key in any label or log line', async () => {
    await admitted(s, '/a/x', 31); // 30 then an API-level 429
    expect(await status(`${s.gw}/no-such-api/x`)).toBe(404);
    const keyed = [];
    for (let i = 0; i < 3; i++) keyed.push(await status(`${s.gw}/k/x`, { authorization: `Bearer ${RAW_KEY}` }));
    expect(keyed).toEqual([200, 200, 403]); // quota 2
    const text = await metricsText(s);
    for (const name of [
      'gw_requests_total',
      'gw_rate_limited_total',
      'gw_quota_exceeded_total',
      'gw_decision_seconds',
      'gw_upstream_seconds',
      'gw_store_errors_total',
      'gw_drl_peers',
      'gw_smoothing_allowance',
      'gw_smoothing_events_total',
      'gw_config_errors_total',
    ]) {
      expect(text).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
    expect(text).toMatch(/^gw_requests_total\{api="a",code="2xx"\} 30$/m);
    expect(text).toMatch(/^gw_requests_total\{api="a",code="4xx"\} 1$/m);
    expect(text).toMatch(/^gw_requests_total\{api="",code="4xx"\} 1$/m); // a path no API serves
    expect(text).toMatch(/^gw_rate_limited_total\{api="a",scope="api"\} 1$/m);
    expect(text).toMatch(/^gw_quota_exceeded_total\{api="k"\} 1$/m);
    expect(text).toMatch(/^gw_decision_seconds_count \d+$/m);
    expect(text).toMatch(/^gw_upstream_seconds_count\{api="a"\} 30$/m);
    expect(text).toMatch(/^gw_drl_peers 1$/m);
    expect(text).not.toContain(RAW_KEY);
    expect(s.out()).not.toContain(RAW_KEY);
  });

  test('smoothing events: a JSON log line, the metrics, and a message published for the controller (no raw key)', async () => {
    const sub = new Redis({ port: node.port, host: '127.0.0.1' });
    const got: string[] = [];
    sub.on('message', (_c: string, m: string) => got.push(m));
    await sub.subscribe(SMOOTHING_CHANNEL);
    // 20 per 60 is under drl_threshold: the sliding log in Redis counts it, so it smooths (A 5 → 10 on the 3rd)
    const codes = [];
    for (let i = 0; i < 12; i++) codes.push(await status(`${s.gw}/k/x`, { authorization: SMOOTH_KEY }));
    expect(count(codes, 200)).toBe(10);
    await eventually(async () => got.length === 1, 3000, 'published smoothing event');
    const ev = JSON.parse(got[0]!) as Record<string, unknown>;
    expect(ev).toMatchObject({
      event: 'RateLimitSmoothingUp',
      api_id: 'k',
      limiter_key: `k:h:${sha256hex(SMOOTH_KEY)}`,
      old_allowance: 5,
      new_allowance: 10,
      namespace: ns,
    });
    expect(typeof ev.time).toBe('string');
    const line = s
      .out()
      .split('\n')
      .find((l) => l.includes('"RateLimitSmoothingUp"'));
    expect(JSON.parse(line!)).toMatchObject({
      event: 'RateLimitSmoothingUp',
      api_id: 'k',
      old_allowance: 5,
      new_allowance: 10,
    });
    const text = await metricsText(s);
    expect(text).toMatch(/^gw_smoothing_events_total\{api="k",event="RateLimitSmoothingUp"\} 1$/m);
    expect(text).toMatch(/^gw_smoothing_allowance\{api="k"\} 10$/m);
    expect(s.out()).not.toContain(SMOOTH_KEY);
    sub.disconnect();
  });

  test('/readyz stays 200 while the store is down (its state: /healthz body, gw_store_up); requests keep flowing (kv_failure_mode open)', async () => {
    const store = async (): Promise<unknown> =>
      ((await (await request(`${s.ops}/healthz`)).body.json()) as { store?: unknown }).store;
    expect(await status(`${s.ops}/readyz`)).toBe(200);
    expect(await store()).toBe('up');
    await stopNode(node, true);
    await eventually(async () => (await store()) === 'down', 5000, '/healthz says the store is down');
    expect(await status(`${s.ops}/readyz`)).toBe(200); // the injected readiness probe keeps the pod in its Service
    expect(await status(`${s.gw}/readyz`)).toBe(200);
    expect(gauge(await metricsText(s), 'gw_store_up')).toBe(0);
    expect(await status(`${s.gw}/b/x`)).toBe(200); // keyless DRL limit needs no store
    node = await startNode([], node.port, node.dir);
    await eventually(async () => (await store()) === 'up', 15_000, 'store up again');
    expect(gauge(await metricsText(s), 'gw_store_up')).toBe(1);
    expect(gauge(await metricsText(s), 'gw_store_errors_total')).toBeGreaterThan(0);
  }, 30_000);

  test('SIGTERM: the in-flight request completes, then the process exits 0', async () => {
    const slow = request(`${s.gw}/b/slow`);
    await new Promise((r) => setTimeout(r, 200));
    const exit = s.stop();
    const r = await slow;
    expect(r.statusCode).toBe(200);
    expect(await r.body.text()).toBe('{"ok":true}');
    expect(await exit).toBe(0);
  }, 30_000);
});

describe('gw sidecar while the API server is unreachable', () => {
  test('keeps serving the last good config, then picks up the change made meanwhile', async () => {
    const ns = await freshNamespace('sidecar-cut');
    const up = createServer(
      (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'),
    );
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    const upstream = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
    await writeConfigMap(ns, configOf(ns, apis(100000)));
    // a TCP relay between the sidecar and the API server, which the test cuts and restores
    const kc = readFileSync(kubeconfig(), 'utf8');
    const api = new URL(/server: (\S+)/.exec(kc)![1]!);
    const sockets = new Set<Socket>();
    const relay = createNetServer((c) => {
      const u = connect(Number(api.port), api.hostname);
      sockets.add(c).add(u);
      c.pipe(u).pipe(c);
      for (const x of [c, u]) x.on('error', () => {}).on('close', () => sockets.delete(x));
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as { port: number }).port;
    const cut = async (): Promise<void> => {
      const closed = new Promise((r) => relay.close(r));
      for (const x of sockets) x.destroy();
      await closed;
    };
    const file = join(tempDir('gw-kc-'), 'kubeconfig');
    writeFileSync(file, kc.replace(/server: \S+/, `server: https://127.0.0.1:${port}`));
    const s = await startSidecar({ ns, upstream, kubeconfig: file });
    try {
      expect(await status(`${s.gw}/b/x`)).toBe(200);
      await cut();
      await new Promise((r) => setTimeout(r, 1000));
      await writeConfigMap(ns, configOf(ns, [...apis(100000), { name: 'e', path: '/e/', rate: 100, per: 60 }]));
      expect(await status(`${s.gw}/b/x`)).toBe(200); // last good config
      expect(await status(`${s.gw}/e/x`)).toBe(404); // the change cannot reach it yet
      expect(await status(`${s.ops}/readyz`)).toBe(200);
      expect(s.out()).toMatch(
        /config watch ended; restarting|cannot read config from the API server|config watch failed/,
      );
      await new Promise<void>((r) => relay.listen(port, '127.0.0.1', r));
      await eventually(
        async () => (await status(`${s.gw}/e/x`)) === 200,
        20_000,
        'change picked up after reconnecting',
      );
    } finally {
      await s.stop();
      await cut().catch(() => undefined);
      up.close();
    }
  }, 60_000);
});
