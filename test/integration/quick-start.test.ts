/**
 * The README quick start, for real: `scripts/run.sh` (what `make run` runs after the build) starts the
 * demo echo upstream and `gw standalone` on a scratch copy of examples/, prints the ready line (docs/contract.md#commands-and-flags), and
 * the keyless echo API answers 3 × 200 then 429 {"error":"API Rate Limit Exceeded"} with Retry-After.
 * Ports come from GW_DEMO_UPSTREAM_PORT / GW_LISTEN / GW_ADMIN_LISTEN so the test never needs 8080.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { request } from 'undici';
import { freePort } from '../harness/ports.js';
import { cleanup, tempDir } from '../helpers/standalone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('README quick start (scripts/run.sh)', () => {
  let proc: ChildProcess;
  let out = '';
  let dir: string;
  let gateway: string;
  let admin: string;
  let upstreamPort: number;

  beforeAll(async () => {
    dir = tempDir('gw-run-');
    const [up, gp, ap] = [await freePort(), await freePort(), await freePort()];
    upstreamPort = up;
    gateway = `http://127.0.0.1:${gp}`;
    admin = `http://127.0.0.1:${ap}`;
    proc = spawn('bash', ['scripts/run.sh'], {
      detached: true, // own process group: the test stops run.sh, gw and the echo upstream together
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, // the node running the tests, as make puts it first
        GW_RUN_DIR: join(dir, 'run'),
        GW_DEMO_UPSTREAM_PORT: String(up),
        GW_LISTEN: `127.0.0.1:${gp}`,
        GW_ADMIN_LISTEN: `127.0.0.1:${ap}`,
        GW_LOG_LEVEL: 'warn',
      },
    });
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const end = Date.now() + 20_000;
    while (!out.includes('gw standalone ready:')) {
      if (proc.exitCode !== null || Date.now() > end) throw new Error(`run.sh did not get ready:\n${out}`);
      await sleep(50);
    }
  });

  afterAll(async () => {
    if (proc?.pid && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      process.kill(-proc.pid, 'SIGTERM');
      await exited;
    }
    cleanup(dir);
  });

  test('prints the ready line of docs/contract.md#commands-and-flags and the generated credentials', () => {
    expect(out).toContain(`gw standalone ready: gateway ${gateway} admin ${admin}\n`);
    expect(out).toContain(`echo upstream listening on http://127.0.0.1:${upstreamPort}`);
    expect(out).toMatch(/generated X-Gw-Authorization secret: \S+/);
    expect(existsSync(join(dir, 'run', 'resources', '01-echo-api.yaml'))).toBe(true);
  });

  test('curl /echo/hello: 200, 200, 200, then 429 {"error":"API Rate Limit Exceeded"} with Retry-After', async () => {
    const statuses: number[] = [];
    let last: { body: string; headers: Record<string, unknown> } = { body: '', headers: {} };
    for (let i = 0; i < 4; i++) {
      const r = await request(`${gateway}/echo/hello`);
      last = { body: await r.body.text(), headers: r.headers };
      statuses.push(r.statusCode);
      if (i === 0) expect((JSON.parse(last.body) as { path: string }).path).toBe('/hello'); // proxied to the echo upstream
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(JSON.parse(last.body)).toEqual({ error: 'API Rate Limit Exceeded' });
    const retryAfter = Number(last.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(last.headers['x-ratelimit-limit']).toBe('3');
  });

  test('the keyed example API answers with the demo key', async () => {
    const r = await request(`${gateway}/orders/list`, { headers: { authorization: 'demo-key-0123456789abcdef' } });
    await r.body.dump();
    expect(r.statusCode).toBe(200);
    const anon = await request(`${gateway}/orders/list`);
    expect(JSON.parse(await anon.body.text())).toEqual({ error: 'Authorization field missing' });
  });

  test('the streaming example accepts an event with 202 and delivers it to the demo upstream', async () => {
    const r = await request(`${gateway}/events/in`, {
      method: 'POST',
      body: '{"user":{"id":"u1"},"debug":true}',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.statusCode).toBe(202);
    expect((JSON.parse(await r.body.text()) as { status: string }).status).toBe('accepted');
    const end = Date.now() + 5000;
    let metrics = '';
    while (!metrics.includes('gw_stream_messages_out_total{api="events",stream="intake"} 1') && Date.now() < end) {
      await sleep(100);
      const m = await request(`${admin}/metrics`);
      metrics = await m.body.text();
    }
    expect(metrics).toContain('gw_stream_messages_out_total{api="events",stream="intake"} 1');
  });

  test('stopping make run stops the demo upstream too', async () => {
    const exited = new Promise((r) => proc.once('exit', r));
    process.kill(-proc.pid!, 'SIGTERM');
    await exited;
    const end = Date.now() + 5000;
    while ((await listening(upstreamPort)) && Date.now() < end) await sleep(100);
    expect(await listening(upstreamPort)).toBe(false);
  });
});

describe('scripts/run.sh refuses a busy demo-upstream port', () => {
  test('exits non-zero naming the port instead of proxying to a stranger', async () => {
    const dir = tempDir('gw-run-');
    const blocker = (await import('node:http')).createServer((_q, s) => s.end('not ours'));
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const p = spawn('bash', ['scripts/run.sh'], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
          GW_RUN_DIR: join(dir, 'run'),
          GW_DEMO_UPSTREAM_PORT: String(port),
          GW_LISTEN: `127.0.0.1:${await freePort()}`,
          GW_ADMIN_LISTEN: `127.0.0.1:${await freePort()}`,
        },
      });
      let err = '';
      p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((r) => p.once('exit', r));
      expect(code).not.toBe(0);
      expect(err).toContain(`could not listen on 127.0.0.1:${port}`);
    } finally {
      blocker.close();
      cleanup(dir);
    }
  });
});
