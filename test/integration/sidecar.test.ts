/**
 * `gw sidecar` in cluster mode against the real kube-apiserver and Redis: config from the gw-config
 * ConfigMap (watched, bad config refused, previous kept), sessions from Redis, limits enforced.
 */
import type { Server } from 'node:http';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { sha256hex } from '../../lib/hash.js';
import { RedisSessionStore } from '../../stores/sessions-redis.js';
import { startEcho } from '../../scripts/echo-upstream.js';
import { freshNamespace } from '../helpers/kube.js';
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

const configFor = (ns: string, rate: number, keyless = true): string =>
  configOf(ns, [{ name: 'app', path: '/', rate, per: 60, keyless }]);

describe('gw sidecar in a cluster', () => {
  let ns: string;
  let echo: { server: Server; url: string };
  let sc: Sidecar;
  let gw: string;
  let redis: Redis;

  beforeAll(async () => {
    ns = await freshNamespace('sidecar');
    redis = await freshRedis();
    echo = await startEcho();
    await writeConfigMap(ns, configFor(ns, 3));
    sc = await startSidecar({ ns, upstream: echo.url, redis: redisUrl(), group: 'g1' });
    gw = sc.gw;
  });
  afterAll(async () => {
    await sc?.stop();
    echo?.server.close();
    redis?.disconnect();
  });

  test('no gw-config in its namespace: alive but not ready until the config is written (readyz = config loaded)', async () => {
    const empty = await freshNamespace('sidecar-empty');
    const s = await startSidecar({ ns: empty, upstream: echo.url, waitFor: '/healthz' });
    try {
      await new Promise((r) => setTimeout(r, 500)); // the API server has answered by now: still no config
      expect(await status(`${s.ops}/readyz`)).toBe(503);
      await writeConfigMap(empty, configFor(empty, 5));
      await eventually(async () => (await status(`${s.ops}/readyz`)) === 200, 5_000, 'ready once the config is loaded');
      expect(await status(`${s.gw}/x`)).toBe(200);
    } finally {
      await s.stop();
    }
  });

  test('enforces the limit from the ConfigMap, proxying to --upstream', async () => {
    const s = [];
    for (let i = 0; i < 4; i++) s.push(await status(`${gw}/x`));
    expect(s).toEqual([200, 200, 200, 429]);
  });

  test('a ConfigMap change takes effect; a bad config is refused and the previous one kept', async () => {
    await writeConfigMap(ns, configFor(ns, 1000));
    await eventually(async () => (await status(`${gw}/y`)) === 200);
    await writeConfigMap(ns, '{"hash": 1, "apis": "nope"}');
    await eventually(async () => /gw_config_errors_total 1/.test(await metricsText(sc)));
    expect(await status(`${gw}/z`)).toBe(200);
    expect(sc.out()).toContain('config refused, keeping the previous one');
  });

  test('keys are looked up in Redis; a new session works at once', async () => {
    await writeConfigMap(ns, configFor(ns, 1000, false));
    await eventually(async () => (await status(`${gw}/k`)) === 401);
    expect(await status(`${gw}/k`, { authorization: 'sidecar-key' })).toBe(403);
    const store = new RedisSessionStore(redis, pino({ level: 'silent' }));
    await store.put(sha256hex('sidecar-key'), { namespace: ns, session: { rate: 2, per: 60 } });
    await eventually(async () => (await status(`${gw}/k`, { authorization: 'sidecar-key' })) === 200, 500);
    expect(await status(`${gw}/k`, { authorization: 'sidecar-key' })).toBe(200);
    expect(await status(`${gw}/k`, { authorization: 'sidecar-key' })).toBe(429);
  });

  test("a key of another namespace is refused (403): sessions share one Redis, a key reaches only its namespace's APIs", async () => {
    const store = new RedisSessionStore(redis, pino({ level: 'silent' }));
    // empty access_rights: every API — of its own namespace only
    await store.put(sha256hex('foreign-key'), { namespace: `${ns}-other`, session: { rate: 100, per: 60 } });
    await store.put(sha256hex('home-key'), { namespace: ns, session: { rate: 100, per: 60 } });
    await eventually(async () => (await status(`${gw}/k`, { authorization: 'home-key' })) === 200, 2000);
    expect(await status(`${gw}/k`, { authorization: 'foreign-key' })).toBe(403);
  });

  test('registers itself as a DRL peer of its group', async () => {
    const peers = await redis.zcard(`gw:drl:{${ns}/g1}:peers`); // the group within its namespace
    expect(peers).toBe(1);
  });
});
