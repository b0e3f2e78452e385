/**
 * HTTP/2 connections against the gateway's bounds (docs/proxy.md, "Slow clients and connection caps"), on
 * the real `gw standalone`, plain (h2c) and TLS (ALPN h2) listeners, with raw frames over loopback sockets:
 * a client that half-closes (FIN, no GOAWAY) has its connection closed and its slot in the caps freed; a
 * TLS 1.2 client that asks for a renegotiation (openssl s_client's `R`) has its connection closed; an HTTP/2
 * connection that opens no stream (TLS h2 without its preface, h2c after its SETTINGS) is cut after headers_timeout;
 * a method HTTP/1.1 would refuse is refused over HTTP/2 too; CONNECT and expectations are answered as node does.
 */
import { spawn, spawnSync } from 'node:child_process';
import { connect as h2connect } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { gatewayCerts, issue, type Issued } from '../../helpers/certs.js';
import { frame, h2get, PREFACE } from '../../helpers/h2.js';
import { CLI, cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

/** An empty SETTINGS frame. */
const SETTINGS = frame(4, 0, 0, Buffer.alloc(0));
const PER_CLIENT = 4;
/** headers_timeout (s): an HTTP/2 session with no stream is cut after it */
const IDLE_S = 3;

/** Resolves when the server has closed `socket` (its FIN or reset), or after `ms` with false. */
function serverCloses(socket: Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    const done = (): void => {
      clearTimeout(t);
      resolve(true);
    };
    socket.once('end', done);
    socket.once('close', done);
    socket.resume(); // read (and drop) the server's SETTINGS, so its FIN is seen
  });
}

describe('HTTP/2 connections and the connection caps', () => {
  let echo: { server: Server; url: string };
  let dir: string;
  let certs: string;
  let ca: Issued;
  let plain: Standalone;
  let tlsGw: Standalone;
  const port = (g: Standalone): number => Number(new URL(g.gateway).port);

  beforeAll(async () => {
    echo = await startEcho();
    dir = tempDir();
    writeFileSync(
      join(dir, 'api.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: open}
spec:
  use_keyless: true
  proxy: {listen_path: /open/, target_url: '${echo.url}'}
`,
    );
    const tlsFiles = gatewayCerts();
    ({ dir: certs, ca } = tlsFiles);
    const gwCert = tlsFiles.gw;
    const caps = `max_connections_per_client: ${PER_CLIENT}\nmax_connections: ${4 * PER_CLIENT}\nheaders_timeout: ${IDLE_S}\n`;
    writeFileSync(join(certs, 'plain.yaml'), caps);
    writeFileSync(
      join(certs, 'tls.yaml'),
      `${caps}tls: {cert_file: ${gwCert.cert}, key_file: ${gwCert.key}, client_ca_file: ${ca.cert}}\n`,
    );
    [plain, tlsGw] = await Promise.all([
      startStandalone(dir, ['--config', join(certs, 'plain.yaml')]),
      startStandalone(dir, ['--config', join(certs, 'tls.yaml')]),
    ]);
  }, 30_000);

  afterAll(async () => {
    const exited = [plain?.proc.exitCode, tlsGw?.proc.exitCode];
    await Promise.all([plain?.stop(), tlsGw?.stop()]);
    echo?.server.close();
    echo?.server.closeAllConnections();
    if (dir) cleanup(dir);
    if (certs) cleanup(certs);
    expect(exited).toEqual([null, null]);
  });

  /** An HTTP/2 connection to `g` that has sent its preface and SETTINGS (TLS: after an ALPN h2 handshake). */
  async function h2socket(g: Standalone, overTls: boolean): Promise<Socket> {
    const socket: Socket = overTls
      ? tlsConnect({
          port: port(g),
          host: '127.0.0.1',
          ca: readFileSync(ca.cert),
          servername: 'localhost',
          ALPNProtocols: ['h2'],
        })
      : netConnect(port(g), '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once(overTls ? 'secureConnect' : 'connect', r));
    socket.write(Buffer.concat([PREFACE, SETTINGS]));
    return socket;
  }

  for (const overTls of [false, true]) {
    it(`a client's FIN closes its ${overTls ? 'TLS h2' : 'h2c'} connection and frees its slot in the caps`, async () => {
      const g = overTls ? tlsGw : plain;
      // twice the per-client cap, one after the other: each slot must come back
      for (let round = 0; round < 2; round++) {
        const held = await Promise.all(Array.from({ length: PER_CLIENT }, () => h2socket(g, overTls)));
        await new Promise((r) => setTimeout(r, 200)); // the sessions are set up
        for (const s of held) s.end(); // FIN, no GOAWAY
        const closed = await Promise.all(held.map((s) => serverCloses(s, 5000)));
        for (const s of held) s.destroy();
        expect(closed).toEqual(held.map(() => true));
      }
      // the address is served again (on the old code its PER_CLIENT slots stayed taken: closed at once)
      const session = overTls
        ? h2connect(`https://localhost:${port(g)}`, { ca: readFileSync(ca.cert) })
        : h2connect(g.gateway);
      session.on('error', () => undefined);
      try {
        const r = await h2get(session, '/open/x');
        expect(r.headers[':status']).toBe(200);
      } finally {
        session.close();
      }
    }, 30_000);
  }

  it('a TLS 1.2 renegotiation closes the connection (a second handshake is never checked)', async () => {
    // openssl s_client: handshake, `R` (renegotiate), then a request; the old code answered it (200)
    const client = spawn(
      'openssl',
      ['s_client', '-tls1_2', '-connect', `127.0.0.1:${port(tlsGw)}`, '-servername', 'localhost'],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let out = '';
    client.stdout.on('data', (c: Buffer) => (out += c.toString('latin1')));
    client.stderr.on('data', (c: Buffer) => (out += c.toString('latin1')));
    const exited = new Promise<void>((r) => client.once('close', () => r()));
    const wait = (ms: number): Promise<unknown> => Promise.race([exited, new Promise((r) => setTimeout(r, ms))]);
    const until = Date.now() + 10_000;
    while (!out.includes('---\n') && !out.includes('Verify return code') && Date.now() < until) await wait(50);
    await wait(300);
    client.stdin.write('R\n');
    await wait(1000);
    client.stdin.write('GET /open/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    await wait(2000);
    client.kill();
    await exited;
    expect(out).toContain('RENEGOTIATING');
    expect(out).not.toContain('HTTP/1.1 200');
  }, 30_000);

  for (const overTls of [false, true]) {
    it(`an idle ${overTls ? 'TLS h2 connection without its preface' : 'h2c connection with no stream'} is cut after headers_timeout`, async () => {
      const g = overTls ? tlsGw : plain;
      const t0 = performance.now();
      let socket: Socket;
      if (overTls) {
        socket = tlsConnect({
          port: port(g),
          host: '127.0.0.1',
          ca: readFileSync(ca.cert),
          servername: 'localhost',
          ALPNProtocols: ['h2'],
        });
        socket.on('error', () => undefined);
        await new Promise((r) => socket.once('secureConnect', r));
      } else socket = await h2socket(g, false);
      const closed = await serverCloses(socket, IDLE_S * 1000 + 7000);
      const s = (performance.now() - t0) / 1000;
      socket.destroy();
      expect(closed).toBe(true);
      expect(s).toBeGreaterThan(IDLE_S - 0.5);
    }, 30_000);
  }

  it('a Host other than :authority over HTTP/2 is refused with 400; the same one is served', async () => {
    const session = h2connect(plain.gateway);
    session.on('error', () => undefined);
    try {
      const authority = new URL(plain.gateway).host;
      const other = await h2get(session, '/open/x', { ':authority': authority, host: 'elsewhere.example' });
      expect(other.headers[':status']).toBe(400);
      expect(JSON.parse(other.body)).toEqual({ error: 'Host differs from :authority' });
      const same = await h2get(session, '/open/x', { ':authority': authority, host: authority.toUpperCase() });
      expect(same.headers[':status']).toBe(200);
    } finally {
      session.close();
    }
  }, 30_000);

  it('a method HTTP/1.1 would refuse is refused over HTTP/2 too (a lower-case trace is not TRACE past its refusal); a known one is forwarded', async () => {
    const session = h2connect(plain.gateway);
    session.on('error', () => undefined);
    try {
      for (const method of ['trace', 'get', 'FOO']) {
        const r = await h2get(session, '/open/x', {}, method);
        expect([method, r.headers[':status'], JSON.parse(r.body)]).toEqual([
          method,
          400,
          { error: 'Bad request: unknown method' },
        ]);
      }
      expect((await h2get(session, '/open/x', {}, 'TRACE')).headers[':status']).toBe(405);
      const propfind = await h2get(session, '/open/x', {}, 'PROPFIND');
      expect([propfind.headers[':status'], (JSON.parse(propfind.body) as { method: string }).method]).toEqual([
        200,
        'PROPFIND',
      ]);
    } finally {
      session.close();
    }
  }, 30_000);

  it('CONNECT over HTTP/2 is 405 and an expectation other than 100-continue 417, as node answers them; 100-continue gets its 100, then the request is forwarded', async () => {
    const session = h2connect(plain.gateway);
    session.on('error', () => undefined);
    const status = (req: ReturnType<typeof session.request>): Promise<number> =>
      new Promise((resolve, reject) => {
        req.on('response', (h) => resolve(Number(h[':status'])));
        req.on('error', reject);
        req.resume();
      });
    try {
      const connect = session.request({ ':method': 'CONNECT', ':authority': 'elsewhere.example:443' });
      expect(await status(connect)).toBe(405);
      connect.close();
      const teapot = session.request({ ':method': 'POST', ':path': '/open/x', expect: 'teapot' });
      teapot.end('x');
      expect(await status(teapot)).toBe(417);
      const cont = session.request({ ':method': 'POST', ':path': '/open/x', expect: '100-continue' });
      const continued = new Promise<boolean>((r) => cont.once('continue', () => r(true)));
      const answered = status(cont);
      expect(await continued).toBe(true);
      cont.end('body');
      expect(await answered).toBe(200);
    } finally {
      session.close();
    }
  }, 30_000);

  it('a client_ca_file that holds no certificate stops the start, naming the option', () => {
    writeFileSync(join(certs, 'empty-ca.pem'), 'not a certificate\n');
    const gwCert = issue(certs, 'ca', 'gw2', 'localhost');
    writeFileSync(
      join(certs, 'bad-ca.yaml'),
      `tls: {cert_file: ${gwCert.cert}, key_file: ${gwCert.key}, client_ca_file: ${join(certs, 'empty-ca.pem')}}\n`,
    );
    const r = spawnSync(
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
        join(certs, 'bad-ca.yaml'),
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(r.status).not.toBe(0);
    expect(r.status).not.toBeNull();
    expect(`${r.stdout}${r.stderr}`).toContain('tls.client_ca_file');
  }, 30_000);
});
