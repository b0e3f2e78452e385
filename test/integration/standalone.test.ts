/** The first request limited end to end: real gw standalone process, real echo upstream, real HTTP. */
import { writeFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { sha256hex } from '../../lib/hash.js';
import { run } from '../helpers/chart-tools.js';
import { eventually } from '../helpers/sidecar.js';
import { CLI, cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';

const apiYaml = (name: string, listen: string, target: string, rate: number, per: number, extra = ''): string => `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}}
spec:
  use_keyless: true
  proxy: {listen_path: ${listen}, target_url: ${target}}
  global_rate_limit: {rate: ${rate}, per: ${per}}
${extra}`;

async function get(url: string, headers: Record<string, string> = {}) {
  const r = await request(url, { headers });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text };
}

describe('gw standalone end to end', () => {
  let echo: { server: Server; url: string };
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    echo = await startEcho();
    dir = tempDir();
    writeFileSync(join(dir, 'echo.yaml'), apiYaml('echo', '/echo/', echo.url, 3, 60));
    writeFileSync(join(dir, 'bad.yaml'), apiYaml('bad', '/bad/', echo.url, -1, 60));
    gw = await startStandalone(dir);
  });
  afterAll(async () => {
    await gw?.stop();
    echo?.server.close();
    cleanup(dir);
  });

  test('prints the ready line of docs/contract.md#commands-and-flags', () => {
    expect(gw.output()).toMatch(
      /gw standalone ready: gateway http:\/\/127\.0\.0\.1:\d+ admin http:\/\/127\.0\.0\.1:\d+/,
    );
  });

  test('exactly rate requests pass, then 429 with the API body, Retry-After and X-RateLimit headers', async () => {
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await get(`${gw.gateway}/echo/hello?x=${i}`));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    const ok = JSON.parse(results[0]!.text) as { path: string; headers: Record<string, string> };
    expect(ok.path).toBe('/hello?x=0'); // listen path stripped, query kept
    expect(ok.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(results[0]!.headers['x-ratelimit-limit']).toBe('3');
    expect(results[0]!.headers['x-ratelimit-remaining']).toBe('2');
    const denied = results[3]!;
    expect(JSON.parse(denied.text)).toEqual({ error: 'API Rate Limit Exceeded' });
    expect(Number(denied.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(denied.headers['x-ratelimit-remaining']).toBe('0');
  });

  test('a key whose Secret value ends with a newline (kubectl create secret --from-file) authenticates without it', async () => {
    const keyed = apiYaml('nl', '/nl/', echo.url, 100, 60).replace('use_keyless: true', 'use_keyless: false');
    const secret = `apiVersion: v1\nkind: Secret\nmetadata: {name: nl}\ndata: {key: ${Buffer.from('newline-key-0001\n').toString('base64')}}\n`;
    const key =
      'apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: nl}\nspec: {secretRef: {name: nl, key: key}}\n';
    writeFileSync(join(dir, 'nl.yaml'), `${keyed}---\n${secret}---\n${key}`);
    await eventually(
      async () => (await get(`${gw.gateway}/nl/x`, { authorization: 'newline-key-0001' })).status === 200,
      3000,
      'the key without its newline',
    );
    expect((await get(`${gw.gateway}/nl/x`, { authorization: 'Bearer newline-key-0001' })).status).toBe(200);
  });

  test('a bad manifest is reported naming the file and field, and does not stop the good one', () => {
    expect(gw.output()).toContain('bad.yaml');
    expect(gw.output()).toContain('spec.global_rate_limit.rate');
  });

  test('unknown paths answer 404 JSON; health endpoints answer', async () => {
    const r = await get(`${gw.gateway}/nowhere`);
    expect(r.status).toBe(404);
    expect(JSON.parse(r.text)).toEqual({ error: 'Not Found' });
    expect((await get(`${gw.admin}/healthz`)).status).toBe(200);
    expect((await get(`${gw.admin}/readyz`)).status).toBe(200);
    const metrics = (await get(`${gw.admin}/metrics`)).text;
    expect(metrics).toContain('gw_rate_limited_total{api="echo",scope="api"}');
    expect(metrics).toMatch(/^gw_config_apis [1-9]\d*$/m); // set by standalone too (it stayed 0)
  });

  test('an added, changed or removed file takes effect within 1 s', async () => {
    writeFileSync(join(dir, 'two.yaml'), apiYaml('two', '/two/', echo.url, 1, 60));
    const deadline = Date.now() + 1000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await get(`${gw.gateway}/two/x`)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
    expect((await get(`${gw.gateway}/two/x`)).status).toBe(429);
    unlinkSync(join(dir, 'two.yaml'));
    const gone = Date.now() + 1000;
    while (Date.now() < gone && status !== 404) {
      status = (await get(`${gw.gateway}/two/x`)).status;
      if (status !== 404) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(404);
  });

  test('a file that turns bad keeps serving its previous version', async () => {
    writeFileSync(join(dir, 'keep.yaml'), apiYaml('keep', '/keep/', echo.url, 100, 60));
    let status = 0;
    const end = Date.now() + 1000;
    while (Date.now() < end && status !== 200) status = (await get(`${gw.gateway}/keep/x`)).status;
    expect(status).toBe(200);
    writeFileSync(join(dir, 'keep.yaml'), apiYaml('keep', '/keep/', echo.url, -5, 60));
    await new Promise((r) => setTimeout(r, 800));
    expect(gw.output()).toContain('keeping its previous version');
    expect((await get(`${gw.gateway}/keep/x`)).status).toBe(200);
  });

  test('a key for an API whose manifest was written a moment ago is accepted (no wait for the directory watch)', async () => {
    writeFileSync(
      join(dir, 'fresh.yaml'),
      apiYaml('fresh', '/fresh/', echo.url, 100, 60).replace('use_keyless: true', 'use_keyless: false'),
    );
    const postKey = (key: string, body: unknown) =>
      request(`${gw.admin}/gw/keys/${key}`, {
        method: 'POST',
        headers: { 'x-gw-authorization': 'test-secret', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const r = await postKey('fresh-key-0123456789', {
      rate: 10,
      per: 60,
      access_rights: { fresh: { api_id: 'fresh' } },
    });
    expect(r.statusCode).toBe(200);
    expect(await r.body.json()).toMatchObject({ action: 'added' });
    expect((await get(`${gw.gateway}/fresh/x`, { authorization: 'fresh-key-0123456789' })).status).toBe(200);
    const missing = await postKey('other-key-0123456789', { access_rights: { nowhere: { api_id: 'nowhere' } } });
    expect(missing.statusCode).toBe(400);
    expect(JSON.stringify(await missing.body.json())).toContain('access_rights.nowhere');
    unlinkSync(join(dir, 'fresh.yaml'));
  });

  test('an AccessKey or OAuthClient naming a missing policy or API is logged with what is missing', async () => {
    writeFileSync(
      join(dir, 'dangling.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: dangling}\nspec: {key_hash: ${'b'.repeat(64)}, apply_policies: [ghost]}\n---\n` +
        'apiVersion: gw.io/v1alpha1\nkind: OAuthClient\nmetadata: {name: lost}\nspec: {api_id: no-such-api, client_id: lost-1, secretRef: {name: lost, key: secret}}\n',
    );
    const want = [
      'AccessKey default/dangling (dangling.yaml) refers to something missing: policy not found in namespace default: ghost',
      'OAuthClient default/lost (dangling.yaml) refers to something missing: API not found in namespace default: no-such-api',
    ];
    await eventually(async () => want.every((w) => gw.output().includes(w)), 2000, 'missing-reference log lines');
    for (const w of want) expect(gw.output()).toContain(w);
    unlinkSync(join(dir, 'dangling.yaml'));
  });

  test('SIGTERM drains and exits 0', async () => {
    const code = await gw.stop();
    expect(code).toBe(0);
  });
});

describe('gw standalone: the ready line', () => {
  // startStandalone returns the moment the ready line arrives; the drain handler must already be in
  // place then (it was installed after the line: about one start in three died of the signal)
  test('SIGTERM the moment it is read still drains and exits 0 (10 starts)', async () => {
    const codes: (number | null)[] = [];
    for (let i = 0; i < 10; i++) {
      const dir = tempDir();
      const s = await startStandalone(dir);
      codes.push(await s.stop());
      cleanup(dir);
    }
    expect(codes).toEqual(Array(10).fill(0));
  }, 60_000);
});

describe('gw standalone without Redis: quota counters survive a restart (docs/contract.md#commands-and-flags: a restart loses nothing)', () => {
  test('3 of 5 used, restart: 2 left (GET /gw/keys says so), then 403; a state file that does not validate is ignored with a line', async () => {
    const echo = await startEcho();
    const dir = tempDir();
    writeFileSync(
      join(dir, 'api.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: q}\nspec: {proxy: {listen_path: /q/, target_url: '${echo.url}'}}\n`,
    );
    writeFileSync(
      join(dir, 'key.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k}\nspec: {key_hash: ${sha256hex('quota-key-0001')}, quota_max: 5, quota_renewal_rate: 3600}\n`,
    );
    const hit = async (gw: Standalone): Promise<number> =>
      (await get(`${gw.gateway}/q/x`, { authorization: 'quota-key-0001' })).status;
    const remaining = async (gw: Standalone): Promise<number> => {
      const r = await request(`${gw.admin}/gw/keys/quota-key-0001`, {
        headers: { 'x-gw-authorization': 'test-secret' },
      });
      return ((await r.body.json()) as { quota_remaining: number }).quota_remaining;
    };
    try {
      let gw = await startStandalone(dir);
      expect([await hit(gw), await hit(gw), await hit(gw)]).toEqual([200, 200, 200]);
      expect(await gw.stop()).toBe(0);
      gw = await startStandalone(dir, [], { GW_LOG_LEVEL: 'info' });
      await eventually(async () => gw.output().includes('quota state restored'), 3000, 'the restore line'); // pino writes asynchronously
      expect(await remaining(gw)).toBe(2);
      expect([await hit(gw), await hit(gw), await hit(gw)]).toEqual([200, 200, 403]);
      expect(await gw.stop()).toBe(0);
      // a damaged state file: quotas start afresh, with one line naming the field
      writeFileSync(
        join(dir, '.gw', '.quota-state.json'),
        JSON.stringify({ version: 1, periods: [{ bucket: 'x', used: -1, renews: 0 }] }),
      );
      gw = await startStandalone(dir);
      await eventually(
        async () => /quota state ignored: periods\.0\.used: /.test(gw.output()),
        3000,
        'the ignored line',
      );
      expect(await remaining(gw)).toBe(5);
      expect(await gw.stop()).toBe(0);
    } finally {
      echo.server.close();
      cleanup(dir);
    }
  }, 60_000);
});

describe('gw standalone: a second signal', () => {
  test('SIGTERM then SIGINT while a request is in flight: exits at once with 1 and a line saying so (the drain would wait for it)', async () => {
    const slow = createServer((_req, res) => setTimeout(() => res.end('{}'), 8000).unref());
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', () => r()));
    const dir = tempDir();
    writeFileSync(
      join(dir, 'slow.yaml'),
      apiYaml('slow', '/slow/', `http://127.0.0.1:${(slow.address() as AddressInfo).port}`, 100, 1),
    );
    const s = await startStandalone(dir, [], { GW_LOG_LEVEL: 'info' });
    try {
      const inFlight = request(`${s.gateway}/slow/x`).then(
        (r) => r.statusCode,
        () => 'cut',
      );
      await new Promise((r) => setTimeout(r, 300));
      const exited = new Promise<number | null>((r) => s.proc.once('exit', (c) => r(c)));
      s.proc.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      const t0 = Date.now();
      s.proc.kill('SIGINT');
      expect(await exited).toBe(1);
      expect(Date.now() - t0).toBeLessThan(3000);
      expect(await inFlight).toBe('cut');
      expect(s.output()).toContain('second signal while draining');
    } finally {
      if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
      slow.closeAllConnections();
      slow.close();
      cleanup(dir);
    }
  }, 30_000);
});

describe('gw standalone with a bad --config', () => {
  let dir: string;
  beforeAll(() => (dir = tempDir()));
  afterAll(() => cleanup(dir));

  test.each([
    ['broken YAML', 'enable_kv_rolling_limiter: [\n', /invalid YAML: .*line 2, column 1$/],
    ['an unknown option', 'enable_kv_rollin_limiter: true\n', /enable_kv_rollin_limiter/],
    ['a wrong type', 'kv_deadline_ms: soon\n', /kv_deadline_ms: .*number/],
  ])('%s → exit 1 with one line naming the file', async (_what, text, reason) => {
    const cfg = join(dir, 'gw-config.yml.txt');
    writeFileSync(cfg, text);
    const r = await run(
      process.execPath,
      [
        CLI,
        'standalone',
        '--resources',
        dir,
        '--listen',
        '127.0.0.1:0',
        '--admin-listen',
        '127.0.0.1:0',
        '--config',
        cfg,
      ],
      { timeoutMs: 20_000 },
    );
    expect(r.code).toBe(1);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(cfg);
    expect(lines[0]).toMatch(reason);
  });

  test('conflicting algorithm flags start, with a warning naming the one used and the ones ignored', async () => {
    const cfg = join(dir, 'algorithms.yml.txt');
    writeFileSync(cfg, 'enable_fixed_window_rate_limiter: true\nenable_sentinel_rate_limiter: true\n');
    const gw = await startStandalone(dir, ['--config', cfg]);
    try {
      expect(gw.output()).toContain(
        'more than one limiter algorithm enabled: fixed_window is used, enable_sentinel_rate_limiter ignored',
      );
    } finally {
      expect(await gw.stop()).toBe(0);
    }
  });
});

describe('gw standalone: draining on SIGTERM with keep-alive clients attached', () => {
  test('a request in flight at the signal completes with Connection: close, an idle client does not hold the exit, and the process exits as soon as the response is done', async () => {
    const slow = createServer((_req, res) => setTimeout(() => res.end('{}'), 800).unref());
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', () => r()));
    const dir = tempDir();
    writeFileSync(
      join(dir, 'slow.yaml'),
      apiYaml('slow', '/slow/', `http://127.0.0.1:${(slow.address() as AddressInfo).port}`, 100, 1),
    );
    const s = await startStandalone(dir);
    // a keep-alive client: one connection it keeps for 60 s, longer than the gateway's keep-alive timeout
    const client = new Agent({ keepAliveTimeout: 60_000, connections: 1 });
    const idle = new Agent({ keepAliveTimeout: 60_000, connections: 1 });
    try {
      // an idle keep-alive connection, attached before the signal
      const warm = await request(`${s.gateway}/healthz`, { dispatcher: idle });
      await warm.body.dump();
      const exited = new Promise<number>((r) => s.proc.once('exit', () => r(Date.now())));
      const inFlight = request(`${s.gateway}/slow/x`, { dispatcher: client }).then(async (r) => {
        await r.body.dump();
        return { status: r.statusCode, connection: r.headers.connection, at: Date.now() };
      });
      await new Promise((r) => setTimeout(r, 300));
      const t0 = Date.now();
      s.proc.kill('SIGTERM');
      const done = await inFlight;
      const exitAt = await exited;
      expect(done.status).toBe(200);
      expect(done.connection).toBe('close');
      // the gateway's keep-alive timeout is 5 s: an exit waiting for it came ~4 s after the response
      expect(exitAt - done.at).toBeLessThan(1500);
      expect(exitAt - t0).toBeLessThan(3000);
    } finally {
      if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
      await Promise.all([client.close(), idle.close()]).catch(() => undefined);
      slow.closeAllConnections();
      slow.close();
      cleanup(dir);
    }
  }, 30_000);
});
