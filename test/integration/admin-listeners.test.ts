/**
 * The listeners of `gw facade` and `gw webhook` (and the metrics listeners), real processes over loopback.
 *
 * Idle keep-alive (lib/tuning.ts ADMIN_KEEP_ALIVE_MS): a client that ignores the server's
 * `Keep-Alive: timeout=N` hint keeps an idle connection as long as its own pool says — Go's net/http 90 s:
 * the kube-apiserver calling the webhook, Prometheus scraping /metrics — and a server that closes it first
 * can do so just as the client writes its next request on it (the request fails with a reset or an EOF;
 * the API server does not retry an AdmissionReview's POST). So these servers announce, and keep, longer
 * than that: raw sockets read the hint from the first response, then reuse the same connection after
 * 6.5 s of idleness (node's default closed it after 6 s: 5 s + 1 s).
 *
 * Termination (docs/helm.md, "Termination"): the preStop hook's SIGUSR2 makes /readyz 503 and every
 * response close its connection while new ones are still served; SIGTERM then drains: a request in
 * flight completes (with `Connection: close`), an idle keep-alive client does not hold the exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { Registry } from 'prom-client';
import type { Server } from 'node:http';
import { freePort } from '../harness/ports.js';
import { kubeconfig, kubectl } from '../helpers/kube.js';
import { spawnServer, type ServerProcess } from '../helpers/server-process.js';
import { CLI, cleanup, tempDir } from '../helpers/standalone.js';
import { issue, makeCa } from '../helpers/certs.js';
import { eventually } from '../helpers/sidecar.js';
import { createOpsServer } from '../../lib/ops-server.js';
import { listen } from '../../lib/serve.js';

/** Go's net/http DefaultTransport IdleConnTimeout (client-go's transports keep it): the longest idle pool seen among the clients of these listeners. */
const GO_IDLE_POOL_MS = 90_000;
/** Past node's default close of an idle connection (keepAliveTimeout 5 s + its 1 s buffer). */
const IDLE_MS = 6_500;

const FACADE_ENV = {
  GW_SECRET: 'admin-listeners-secret-0123456789',
  GW_ACCESS_TOKENS: 'admin-listeners-token-0123456789',
};

/** `gw facade` as the chart runs it (credentials from the environment), on a free loopback port. */
async function spawnFacade(extra: string[] = []): Promise<ServerProcess> {
  const fp = await freePort();
  const url = `http://127.0.0.1:${fp}`;
  const args = ['facade', '--kubeconfig', kubeconfig(), '--namespace', 'default', '--listen', `127.0.0.1:${fp}`];
  return spawnServer('facade', [...args, ...extra], url, url, FACADE_ENV);
}

interface Webhook {
  proc: ChildProcess;
  port: number;
  out: () => string;
  stop(): Promise<void>;
}

/** `gw webhook` over TLS with a certificate of the private CA in `dir` (ca.crt), ready when it says so. */
async function spawnWebhook(dir: string): Promise<Webhook> {
  const port = await freePort();
  const args = ['webhook', '--listen', `127.0.0.1:${port}`];
  args.push('--tls-cert', join(dir, 'tls.crt'), '--tls-key', join(dir, 'tls.key'));
  const proc = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise((r) => proc.once('exit', r));
  const w: Webhook = {
    proc,
    port,
    out: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
  const end = Date.now() + 20_000;
  while (!out.includes('gw webhook ready')) {
    if (Date.now() > end || proc.exitCode !== null) {
      await w.stop();
      throw new Error(`webhook did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return w;
}

interface Reuse {
  /** N of the first response's `Keep-Alive: timeout=N` */
  hint?: number;
  /** the second response's status on the same connection, or when the server closed it (ms after the first response) */
  second: number | { closedAfterMs: number };
}

/** Reads one response (head + content-length or chunked body) from `buf`; undefined while incomplete. */
function oneResponse(buf: string): { status: number; headers: Record<string, string>; rest: string } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = buf.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const body = buf.slice(end + 4);
  let len: number;
  if (headers['content-length'] !== undefined) len = Number(headers['content-length']);
  else if (headers['transfer-encoding'] === 'chunked') {
    const last = body.indexOf('0\r\n\r\n');
    if (last < 0) return undefined;
    len = last + 5;
  } else len = 0;
  if (body.length < len) return undefined;
  return { status: Number(statusLine!.split(' ')[1]), headers, rest: body.slice(len) };
}

/** GET `path` on a new connection, idle `idleMs`, GET it again on the same connection. */
function idleReuse(open: () => Socket, path: string, idleMs: number): Promise<Reuse> {
  return new Promise((resolve, reject) => {
    const socket = open();
    let buf = '';
    let first: { hint?: number; at: number } | undefined;
    let done = false;
    const finish = (r: Reuse): void => {
      done = true;
      socket.destroy();
      resolve(r);
    };
    const request = `GET ${path} HTTP/1.1\r\nHost: gw.test\r\nConnection: keep-alive\r\n\r\n`;
    socket.setEncoding('latin1');
    socket.on('error', (e) => (done ? undefined : reject(e)));
    socket.on('close', () => {
      if (!done && first) finish({ hint: first.hint, second: { closedAfterMs: Date.now() - first.at } });
      else if (!done) reject(new Error('closed before the first response'));
    });
    socket.on('data', (d: string) => {
      buf += d;
      const r = oneResponse(buf);
      if (!r) return;
      buf = r.rest;
      if (!first) {
        const m = /timeout=(\d+)/.exec(r.headers['keep-alive'] ?? '');
        first = { hint: m ? Number(m[1]) : undefined, at: Date.now() };
        setTimeout(() => {
          if (!done) socket.write(request);
        }, idleMs);
      } else finish({ hint: first.hint, second: r.status });
    });
    socket.write(request);
  });
}

describe('idle keep-alive of the facade, webhook and metrics listeners', () => {
  let dir: string;
  let facade: ServerProcess;
  let webhook: Webhook;
  let ops: Server;
  let opsPort: number;

  beforeAll(async () => {
    dir = tempDir('gw-keep-alive-');
    makeCa(dir);
    issue(dir, 'ca', 'tls', 'localhost');
    facade = await spawnFacade();
    webhook = await spawnWebhook(dir);
    // the controller's metrics listener: an ops server listened on with no limits of its own
    ops = createOpsServer(new Registry(), () => true);
    opsPort = Number((await listen(ops, '127.0.0.1:0', '--metrics-listen')).split(':').pop());
  }, 40_000);

  afterAll(async () => {
    await facade?.stop();
    await webhook?.stop();
    ops?.closeAllConnections();
    await new Promise((r) => (ops ? ops.close(r) : r(undefined)));
    if (dir) cleanup(dir);
  });

  test('each announces longer than a Go client idles, and keeps an idle connection past 6 s (node default: closed at 6 s)', async () => {
    const facadePort = Number(new URL(facade.url).port);
    const ca = readFileSync(join(dir, 'ca.crt'));
    const [f, w, m] = await Promise.all([
      idleReuse(() => tcpConnect(facadePort, '127.0.0.1'), '/healthz', IDLE_MS),
      idleReuse(
        () => tlsConnect({ port: webhook.port, host: '127.0.0.1', ca, servername: 'localhost' }),
        '/healthz',
        IDLE_MS,
      ),
      idleReuse(() => tcpConnect(opsPort, '127.0.0.1'), '/metrics', IDLE_MS),
    ]);
    expect({ facade: f, webhook: w, metrics: m }).toEqual({
      facade: { hint: expect.any(Number), second: 200 },
      webhook: { hint: expect.any(Number), second: 200 },
      metrics: { hint: expect.any(Number), second: 200 },
    });
    for (const r of [f, w, m]) expect(r.hint! * 1000).toBeGreaterThan(GO_IDLE_POOL_MS);
  }, 30_000);
});

/** GET over `agent` (node's client, as a keep-alive caller): status and the Connection header. */
function get(url: string, agent?: http.Agent, ca?: Buffer): Promise<{ status: number; connection?: string }> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith('https:') ? process.getBuiltinModule('node:https') : http;
    mod
      .get(url, { agent, ...(ca ? { ca, servername: 'localhost' } : {}) }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      })
      .on('error', reject);
  });
}

describe('gw facade and gw webhook on termination', () => {
  let dir: string;

  beforeAll(() => {
    dir = tempDir('gw-termination-');
    makeCa(dir);
    issue(dir, 'ca', 'tls', 'localhost');
  });
  afterAll(() => {
    if (dir) cleanup(dir);
  });

  test('facade, SIGUSR2 (the preStop notice): /readyz 503, every response closes its connection, new connections served; SIGTERM then exits 0', async () => {
    const f = await spawnFacade();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await get(`${f.url}/healthz`, agent)).toEqual({ status: 200, connection: 'keep-alive' });
      f.proc.kill('SIGUSR2');
      await eventually(async () => (await get(`${f.url}/readyz`)).status === 503, 5000, 'readyz 503 after SIGUSR2');
      for (let i = 0; i < 3; i++)
        expect(await get(`${f.url}/healthz`, agent)).toEqual({ status: 200, connection: 'close' });
      expect(await get(`${f.url}/openapi.json`)).toEqual({ status: 200, connection: 'close' });
      expect(f.output()).toMatch(/preStop: not ready, closing connections after each response/);
      const exited = new Promise<number | null>((r) => f.proc.once('exit', (c) => r(c)));
      f.proc.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      agent.destroy();
      await f.stop();
    }
  }, 40_000);

  test('facade, SIGTERM: a request in flight completes with Connection: close, an idle keep-alive client does not hold the exit', async () => {
    // a key write waits --ready-timeout for a controller to report it Ready (none runs here): 504 after 2 s
    const f = await spawnFacade(['--ready-timeout', '2']);
    const idle = new Agent({ keepAliveTimeout: 60_000, connections: 1 });
    const busy = new Agent({ keepAliveTimeout: 60_000, connections: 1 });
    try {
      const warm = await request(`${f.url}/healthz`, { dispatcher: idle });
      await warm.body.dump();
      expect(warm.headers.connection).toBe('keep-alive');
      const exited = new Promise<{ code: number | null; at: number }>((r) =>
        f.proc.once('exit', (code) => r({ code, at: Date.now() })),
      );
      const raw = 'admin-listeners-key-0123456789abcdef';
      const inFlight = request(`${f.url}/gw/keys/${raw}`, {
        dispatcher: busy,
        method: 'POST',
        headers: { 'x-gw-authorization': FACADE_ENV.GW_SECRET, 'content-type': 'application/json' },
        body: JSON.stringify({ rate: 5, per: 10 }),
      }).then(async (r) => {
        const text = await r.body.text();
        return { status: r.statusCode, connection: r.headers.connection, text, at: Date.now() };
      });
      await new Promise((r) => setTimeout(r, 500));
      const t0 = Date.now();
      f.proc.kill('SIGTERM');
      const done = await inFlight;
      const exit = await exited;
      // answered by the facade, not cut by the drain: the write's 504 ("exists but is not Ready")
      expect({ status: done.status, connection: done.connection }).toEqual({ status: 504, connection: 'close' });
      expect(done.text).toContain('not Ready');
      expect(done.at - t0).toBeGreaterThan(500);
      expect(exit.code).toBe(0);
      // the facade's idle keep-alive timeout is 100 s: an exit that waited for it never came within the test
      expect(exit.at - done.at).toBeLessThan(1500);
      expect(f.output()).toContain('shutting down');
    } finally {
      await f.stop();
      await Promise.all([idle.close(), busy.close()]).catch(() => undefined);
      await kubectl(['delete', 'accesskeys', '--all', '-n', 'default', '--wait=false']).catch(() => undefined);
    }
  }, 40_000);

  test('webhook, SIGUSR2: /readyz 503 and every response closes its connection; SIGTERM with an idle keep-alive client exits at once', async () => {
    const w = await spawnWebhook(dir);
    const ca = readFileSync(join(dir, 'ca.crt'));
    const url = `https://127.0.0.1:${w.port}`;
    const https = process.getBuiltinModule('node:https');
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca, servername: 'localhost' });
    // attached before the notice and left idle through it: the notice closes no idle connection
    const idle = new https.Agent({ keepAlive: true, maxSockets: 1, ca, servername: 'localhost' });
    try {
      expect(await get(`${url}/healthz`, idle, ca)).toEqual({ status: 200, connection: 'keep-alive' });
      expect(await get(`${url}/readyz`, agent, ca)).toEqual({ status: 200, connection: 'keep-alive' });
      w.proc.kill('SIGUSR2');
      await eventually(
        async () => (await get(`${url}/readyz`, undefined, ca)).status === 503,
        5000,
        'readyz 503 after SIGUSR2',
      );
      expect(await get(`${url}/healthz`, agent, ca)).toEqual({ status: 200, connection: 'close' });
      expect(w.out()).toMatch(/preStop: not ready, closing connections after each response/);
      const exited = new Promise<{ code: number | null; at: number }>((r) =>
        w.proc.once('exit', (code) => r({ code, at: Date.now() })),
      );
      const t0 = Date.now();
      w.proc.kill('SIGTERM');
      const exit = await exited;
      expect(exit.code).toBe(0);
      // the webhook's idle keep-alive timeout is 100 s: an exit waiting for the idle client never came
      expect(exit.at - t0).toBeLessThan(1500);
    } finally {
      agent.destroy();
      idle.destroy();
      await w.stop();
    }
  }, 40_000);
});
