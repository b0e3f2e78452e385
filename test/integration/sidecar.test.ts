/**
 * `gw sidecar` in cluster mode against the real kube-apiserver and Redis: config from the gw-config
 * ConfigMap (watched, bad config refused, previous kept), sessions from Redis, limits enforced.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { request } from 'undici';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { ApiDefinitionResource } from '../../crds/kinds.js';
import { compileConfig } from '../../controller/compile/compile-config.js';
import { sha256hex } from '../../lib/hash.js';
import { RedisSessionStore } from '../../lib/sessions-redis.js';
import { startEcho } from '../../scripts/echo-upstream.js';
import { freePort } from '../harness/ports.js';
import { CLI } from '../helpers/standalone.js';
import { freshNamespace, kubeconfig, kubectl } from '../helpers/kube.js';
import { freshRedis, redisUrl } from '../helpers/redis.js';

function configFor(ns: string, rate: number, keyless = true): string {
  const api = ApiDefinitionResource.parse({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name: 'app', namespace: ns },
    spec: { use_keyless: keyless, proxy: { listen_path: '/' }, global_rate_limit: { rate, per: 60 } },
  });
  return JSON.stringify(compileConfig([api], []).config);
}

async function writeConfigMap(ns: string, text: string): Promise<void> {
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gw-config', namespace: ns }, data: { 'config.json': text } };
  const r = await kubectl(['apply', '-f', '-'], stringify(cm));
  if (r.code !== 0) throw new Error(r.stderr);
}

async function status(url: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(url, { headers });
  await r.body.dump();
  return r.statusCode;
}

async function eventually(fn: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('gw sidecar in a cluster', () => {
  let ns: string;
  let echo: { server: Server; url: string };
  let proc: ChildProcess;
  let gw: string;
  let ops: string;
  let out = '';
  let redis: Redis;

  beforeAll(async () => {
    ns = await freshNamespace('sidecar');
    redis = await freshRedis();
    echo = await startEcho();
    await writeConfigMap(ns, configFor(ns, 3));
    const [gp, mp] = [await freePort(), await freePort()];
    gw = `http://127.0.0.1:${gp}`;
    ops = `http://127.0.0.1:${mp}`;
    proc = spawn(
      process.execPath,
      [CLI, 'sidecar', '--upstream', echo.url, '--kubeconfig', kubeconfig(), '--namespace', ns, '--redis', redisUrl(), '--listen', `127.0.0.1:${gp}`, '--metrics-listen', `127.0.0.1:${mp}`, '--group', 'g1'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GW_LOG_LEVEL: 'info' } },
    );
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(async () => (await status(`${ops}/readyz`).catch(() => 0)) === 200, 15_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${out}`);
    });
  });
  afterAll(async () => {
    proc?.kill('SIGTERM');
    echo?.server.close();
    redis?.disconnect();
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
    await eventually(async () => {
      const r = await request(`${ops}/metrics`);
      return /gw_config_errors_total 1/.test(await r.body.text());
    });
    expect(await status(`${gw}/z`)).toBe(200);
    expect(out).toContain('config refused, keeping the previous one');
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

  test('registers itself as a DRL peer of its group', async () => {
    const peers = await redis.zcard('gw:drl:{g1}:peers');
    expect(peers).toBe(1);
  });
});
