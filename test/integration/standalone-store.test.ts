/**
 * `gw standalone --redis`: /readyz never follows the store (200 while Redis is down; the store's state is
 * in /healthz's body and gw_store_up); kv_failure_mode closed answers 503 "Rate limiter unavailable"; while
 * it is down a key seen before or defined in the directory keeps working and any other gets a quick 503; a store that comes back
 * empty (restarted without persistence) gets every session of the directory again.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { startNode, stopNode, type Node } from '../harness/redis-cluster.js';
import { spawn } from 'node:child_process';
import { CLI, cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { eventually } from '../helpers/sidecar.js';

async function healthStore(url: string): Promise<unknown> {
  const r = await request(`${url}/healthz`);
  const body = (await r.body.json()) as { store?: unknown };
  return r.statusCode === 200 ? body.store : `status ${r.statusCode}`;
}

async function code(url: string, key?: string): Promise<number> {
  const r = await request(url, key ? { headers: { authorization: key } } : {});
  await r.body.dump();
  return r.statusCode;
}

describe('gw standalone with --redis', () => {
  let node: Node;
  let gw: Standalone;
  let dir: string;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  beforeAll(async () => {
    node = await startNode();
    echo = await startEcho();
    dir = tempDir();
    writeFileSync(
      join(dir, 'a.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: a}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /a/, target_url: '${echo.url}'}\n`,
    );
    writeFileSync(
      join(dir, 'k.yaml'),
      [
        `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: k}\nspec:\n  proxy: {listen_path: /k/, target_url: '${echo.url}'}`,
        `apiVersion: v1\nkind: Secret\nmetadata: {name: seen}\nstringData: {key: seen-key-0001}`,
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: seen}\nspec: {secretRef: {name: seen}}`,
        `apiVersion: v1\nkind: Secret\nmetadata: {name: unseen}\nstringData: {key: unseen-key-0001}`,
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: unseen}\nspec: {secretRef: {name: unseen}}`,
      ].join('\n---\n'),
    );
    gw = await startStandalone(dir, ['--redis', `redis://127.0.0.1:${node.port}`]);
  }, 30_000);
  afterAll(async () => {
    await gw?.stop();
    echo?.server.close();
    if (node) await stopNode(node);
    if (dir) cleanup(dir);
  });

  test('/readyz stays 200 while the store is unreachable (its state is in /healthz and gw_store_up); /healthz stays 200', async () => {
    expect(await code(`${gw.admin}/readyz`)).toBe(200);
    expect(await code(`${gw.gateway}/readyz`)).toBe(200);
    expect(await healthStore(gw.admin)).toBe('up');
    expect(await code(`${gw.gateway}/k/x`, 'seen-key-0001')).toBe(200);
    await stopNode(node, true); // --save '': the restarted server comes back empty
    await eventually(async () => (await healthStore(gw.admin)) === 'down', 5000, 'store down in /healthz');
    expect(await healthStore(gw.gateway)).toBe('down');
    expect(await code(`${gw.admin}/readyz`)).toBe(200);
    expect(await code(`${gw.gateway}/readyz`)).toBe(200);
    const metrics = await (await request(`${gw.admin}/metrics`)).body.text();
    expect(metrics).toMatch(/^gw_store_up 0$/m);
    expect(await code(`${gw.gateway}/a/x`)).toBe(200); // traffic keeps flowing
    // keys: the last session seen for a key answers; a key of the directory not seen yet answers with the
    // session standalone wrote for it (it used to get 503); a key standalone knows nothing of gets a quick
    // 503 (not a 500 after retries): another instance sharing the Redis might have written it
    expect(await code(`${gw.gateway}/k/x`, 'seen-key-0001')).toBe(200);
    expect(await code(`${gw.gateway}/k/x`, 'unseen-key-0001')).toBe(200);
    const t = Date.now();
    const unseen = await request(`${gw.gateway}/k/x`, { headers: { authorization: 'stranger-key-0001' } });
    expect(unseen.statusCode).toBe(503);
    expect(unseen.headers['retry-after']).toBe('1');
    expect(await unseen.body.json()).toEqual({ error: 'Session store unavailable' });
    expect(Date.now() - t).toBeLessThan(500);
    // a key written through the facade while the store is down: saved, served from the directory (it was a 500)
    const put = await request(`${gw.admin}/gw/keys/written-while-down`, {
      method: 'POST',
      headers: { 'x-gw-authorization': 'test-secret', 'content-type': 'application/json' },
      body: '{"rate":5,"per":10}',
    });
    expect(put.statusCode).toBe(200);
    await put.body.dump();
    expect(await code(`${gw.gateway}/k/x`, 'written-while-down')).toBe(200);
    node = await startNode([], node.port, node.dir);
    await eventually(async () => (await healthStore(gw.admin)) === 'up', 15_000, 'store up again');
    expect(await code(`${gw.gateway}/readyz`)).toBe(200);
    expect(await (await request(`${gw.admin}/metrics`)).body.text()).toMatch(/^gw_store_up 1$/m);
    // the empty store got the directory's sessions again
    await eventually(
      async () => (await code(`${gw.gateway}/k/x`, 'unseen-key-0001')) === 200,
      5000,
      'sessions written again',
    );
    expect(await code(`${gw.gateway}/k/x`, 'seen-key-0001')).toBe(200);
    expect(gw.output()).toContain('session store error');
  }, 30_000);

  test('a store back after an outage of 8 s is used again within about half a second (the reconnect backoff is capped at 500 ms)', async () => {
    expect(await healthStore(gw.admin)).toBe('up');
    await stopNode(node, true);
    await eventually(async () => (await healthStore(gw.admin)) === 'down', 5000, 'store down');
    await new Promise((r) => setTimeout(r, 8000)); // ioredis's own backoff has grown to ~0.9 s by now (2 s later on)
    node = await startNode([], node.port, node.dir);
    const back = Date.now();
    await eventually(async () => (await healthStore(gw.admin)) === 'up', 10_000, 'store up again');
    // 2–4 s with ioredis's default backoff; ≤ 0.5 s + the connection set-up now (the bound leaves room for a loaded machine)
    expect(Date.now() - back).toBeLessThan(1500);
  }, 30_000);

  test('a database index the server does not have (/99): the store is not used (it went on in database 0), /healthz says store down, a line says why', async () => {
    const client = new Redis(`redis://127.0.0.1:${node.port}`);
    const own = tempDir();
    writeFileSync(
      join(own, 'k.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: db99}\nspec: {key_hash: ${sha256hex('db99-key')}}\n`,
    );
    let wrong: Standalone | undefined;
    try {
      wrong = await startStandalone(own, ['--redis', `redis://127.0.0.1:${node.port}/99`]);
      await eventually(async () => wrong!.output().includes('the server has no such database'), 5000, 'the line');
      expect(await healthStore(wrong.admin)).toBe('down');
      expect(await code(`${wrong.admin}/readyz`)).toBe(200);
      expect(await client.exists(`gw:session:${sha256hex('db99-key')}`)).toBe(0); // its session is not in database 0
    } finally {
      await wrong?.stop();
      client.disconnect();
      cleanup(own);
    }
  }, 30_000);

  test('a gateway whose start fails (admin address in use) exits 1 and takes its DRL heartbeat back: the group does not count it', async () => {
    const client = new Redis(`redis://127.0.0.1:${node.port}`);
    try {
      const peers = async (): Promise<number> => {
        let n = 0;
        for (const k of await client.keys('gw:drl:*:peers')) n += await client.zcard(k);
        return n;
      };
      // the running gateway's own heartbeat (re-sent within a period when an earlier test restarted the store empty)
      await eventually(async () => (await peers()) >= 1, 5000, "the running gateway's heartbeat");
      const before = await peers();
      const admin = new URL(gw.admin).host; // in use
      const proc = spawn(
        process.execPath,
        [
          CLI,
          'standalone',
          '--resources',
          dir,
          '--listen',
          '127.0.0.1:0',
          '--admin-listen',
          admin,
          '--redis',
          `redis://127.0.0.1:${node.port}`,
        ],
        {
          env: { ...process.env, GW_SECRET: 's', GW_ACCESS_TOKENS: 't', GW_LOG_LEVEL: 'warn' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let err = '';
      proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((r) => proc.once('exit', r));
      expect(code).toBe(1);
      expect(err).toMatch(/--admin-listen/);
      expect(await peers()).toBe(before); // it registered at start; its failed start withdrew it
    } finally {
      client.disconnect();
    }
  }, 30_000);

  test('a store that accepts connections and never answers: the gateway still starts (ready, store down) and stops on SIGTERM', async () => {
    // it used to hang before listening: no ready line, no health, SIGTERM ignored
    const sockets: Socket[] = [];
    const hole = createServer((s) => {
      s.on('error', () => undefined); // gw's connections end with gw: a reset must not be uncaught here
      sockets.push(s);
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', () => r()));
    const port = (hole.address() as AddressInfo).port;
    let silent: Standalone | undefined;
    try {
      silent = await startStandalone(dir, ['--redis', `redis://127.0.0.1:${port}`]);
      expect(await code(`${silent.admin}/healthz`)).toBe(200);
      expect(await code(`${silent.admin}/readyz`)).toBe(200);
      expect(await healthStore(silent.admin)).toBe('down');
      expect(await code(`${silent.gateway}/a/x`)).toBe(200); // kv_failure_mode open: a keyless API is served
      // the store never took the directory's sessions: its keys are still known (they got 503)
      expect(await code(`${silent.gateway}/k/x`, 'unseen-key-0001')).toBe(200);
      expect(await code(`${silent.gateway}/k/x`, 'stranger-key-0001')).toBe(503);
      const exited = new Promise<number | null>((r) => silent!.proc.once('exit', (c) => r(c)));
      silent.proc.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (silent?.proc.exitCode === null) silent.proc.kill('SIGKILL');
      for (const s of sockets) s.destroy();
      hole.close();
    }
  }, 40_000);
});
