/**
 * TLS and h2c per pod on the real `gw sidecar` (docs/helm.md, "TLS and h2c per pod"): the listener flags the
 * injection webhook sets (`--tls-cert /etc/gw-tls/tls.crt --tls-key … --tls-client-ca … --h2c …`) over a
 * directory laid out as the kubelet lays out a Secret volume (each file a symlink through `..data` to a
 * timestamped directory; an update writes a new directory and swaps `..data` by a rename), served over
 * HTTP/1.1 and h2 (ALPN); a Secret update is served to new connections within 10 s; the flags win over the
 * --config file, also after a live change of that file; `--h2c false` turns the preface away; bad flags
 * (a missing file, a key that is not the certificate's) stop the sidecar with one line naming the flag.
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync, copyFileSync, readFileSync } from 'node:fs';
import { connect as h2connect } from 'node:http2';
import { connect as tlsConnect } from 'node:tls';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { issue, makeCa, servedCertificate, type Issued } from '../../helpers/certs.js';
import { h2get } from '../../helpers/h2.js';
import { freshNamespace } from '../../helpers/kube.js';
import {
  configOf,
  eventually,
  refusedSidecar,
  startSidecar,
  writeConfigMap,
  type Sidecar,
} from '../../helpers/sidecar.js';
import { cleanup, tempDir } from '../../helpers/standalone.js';

/** A Secret volume's layout: `<dir>/<key> -> ..data/<key>`, `..data -> ..<generation>/` (kubelet's atomic writer). */
function writeSecretVolume(dir: string, generation: string, files: Record<string, string>): void {
  const gen = join(dir, `..${generation}`);
  mkdirSync(gen, { recursive: true });
  for (const [key, from] of Object.entries(files)) copyFileSync(from, join(gen, key));
  // the new generation goes live in one rename of the ..data symlink; the keys' own links never change
  symlinkSync(`..${generation}`, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  for (const key of Object.keys(files)) {
    try {
      symlinkSync(join('..data', key), join(dir, key));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

/** An HTTP/1.1 GET over TLS on a fresh connection (optionally with a client certificate). */
function httpsGet(port: number, ca: string, path: string, client?: Issued): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect(
      {
        host: '127.0.0.1',
        port,
        servername: 'localhost',
        ca: readFileSync(ca),
        ALPNProtocols: ['http/1.1'],
        ...(client ? { cert: readFileSync(client.cert), key: readFileSync(client.key) } : {}),
      },
      () => s.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`),
    );
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString()));
    s.on('end', () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (!m) return reject(new Error(`no HTTP answer: ${JSON.stringify(got.slice(0, 200))}`));
      resolve({ status: Number(m[1]), body: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
    s.on('error', reject);
  });
}

describe('gw sidecar: TLS from a Secret volume, h2c by flag', () => {
  let echo: { server: Server; url: string };
  let certs: string;
  let ca: Issued;
  let first: Issued;
  let secret: string;
  let configFile: string;
  let sc: Sidecar;
  let ns: string;
  const port = (s: Sidecar): number => Number(new URL(s.gw).port);

  beforeAll(async () => {
    echo = await startEcho();
    certs = tempDir('gw-secret-');
    ca = makeCa(certs, 'ca');
    first = issue(certs, 'ca', 'gen1', 'localhost');
    secret = join(certs, 'secret');
    mkdirSync(secret);
    writeSecretVolume(secret, '2026_12_02_04_00_00.000000001', {
      'tls.crt': first.cert,
      'tls.key': first.key,
      'ca.crt': ca.cert,
    });
    ns = await freshNamespace('tlssecret');
    await writeConfigMap(ns, configOf(ns, [{ name: 'echo', path: '/', rate: 1000, per: 60 }]));
    // a --config file of its own, without tls, and h2c on: the flags decide
    configFile = join(certs, 'config.yaml');
    writeFileSync(configFile, 'h2c: true\nrate_limit_response_headers: quotas\n');
    sc = await startSidecar({
      ns,
      upstream: echo.url,
      configFile,
      args: [
        '--tls-cert',
        join(secret, 'tls.crt'),
        '--tls-key',
        join(secret, 'tls.key'),
        '--tls-client-ca',
        join(secret, 'ca.crt'),
        '--tls-min-version',
        'TLSv1.2',
      ],
    });
  }, 40_000);

  afterAll(async () => {
    await sc?.stop();
    echo?.server.close();
    if (certs) cleanup(certs);
  });

  test('the listener speaks TLS with the mounted pair: HTTP/1.1 and h2 by ALPN, the request proxied', async () => {
    expect(await servedCertificate(port(sc), ca.cert, ['http/1.1'])).toEqual({
      fp: first.fingerprint,
      alpn: 'http/1.1',
    });
    expect((await servedCertificate(port(sc), ca.cert, ['h2', 'http/1.1'])).alpn).toBe('h2');
    const h1 = await httpsGet(port(sc), ca.cert, '/hello');
    expect(h1.status).toBe(200);
    const session = h2connect(`https://localhost:${port(sc)}`, { ca: readFileSync(ca.cert) });
    try {
      const r = await h2get(session, '/hello');
      expect(r.headers[':status']).toBe(200);
    } finally {
      session.close();
    }
    // a plain HTTP/1.1 request on the TLS port is not served as HTTP
    const plain = await new Promise<string>((resolve) => {
      const s = netConnect(port(sc), '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString('latin1')));
      s.on('close', () => resolve(got));
      s.on('error', () => resolve(got));
    });
    expect(plain).not.toMatch(/^HTTP\/1\.1 200/);
  });

  test("client certificates verify against the Secret's ca.crt: one of that CA admitted, one of another CA refused", async () => {
    const client = issue(certs, 'ca', 'client', 'client-1');
    makeCa(certs, 'other');
    const stranger = issue(certs, 'other', 'stranger', 'client-x');
    expect((await httpsGet(port(sc), ca.cert, '/c', client)).status).toBe(200);
    await expect(httpsGet(port(sc), ca.cert, '/c', stranger)).rejects.toThrow();
  });

  test('a Secret update (a new generation directory, ..data swapped by a rename) is served to new connections within 10 s; an open connection keeps working', async () => {
    const session = h2connect(`https://localhost:${port(sc)}`, { ca: readFileSync(ca.cert) });
    try {
      expect((await h2get(session, '/before')).headers[':status']).toBe(200);
      const next = issue(certs, 'ca', 'gen2', 'localhost');
      const t0 = Date.now();
      writeSecretVolume(secret, '2026_12_02_05_00_00.000000002', {
        'tls.crt': next.cert,
        'tls.key': next.key,
        'ca.crt': ca.cert,
      });
      // the kubelet removes the old generation right after the swap
      rmSync(join(secret, '..2026_12_02_04_00_00.000000001'), { recursive: true });
      await eventually(
        async () => (await servedCertificate(port(sc), ca.cert, ['http/1.1'])).fp === next.fingerprint,
        10_000,
        'the new certificate served',
      );
      const took = Date.now() - t0;
      expect(took).toBeLessThan(10_000);
      // the line may reach the output a moment after the new certificate is served
      await eventually(async () => sc.out().includes('gateway TLS files reloaded'), 3000, 'the reload logged');
      // naming the flags whose file changed (the client CA's did not)
      expect(sc.out()).toMatch(/"changed":\["--tls-cert","--tls-key"\][^\n]*gateway TLS files reloaded/);
      expect((await h2get(session, '/after')).headers[':status']).toBe(200);
      expect((await httpsGet(port(sc), ca.cert, '/new')).status).toBe(200);
    } finally {
      session.close();
    }
  }, 20_000);

  test('a live change of the --config file keeps the flags\' TLS: no "cannot change live" for tls, still TLS', async () => {
    writeFileSync(configFile, 'h2c: true\nrate_limit_response_headers: rate_limits\n');
    await eventually(
      async () => sc.out().includes('applied rate_limit_response_headers'),
      10_000,
      'the live change applied',
    );
    expect(sc.out()).not.toMatch(/restart_required[^\n]*tls/);
    expect((await httpsGet(port(sc), ca.cert, '/live')).status).toBe(200);
  }, 15_000);

  test('--h2c false: the HTTP/2 preface on a plain listener is refused (400), HTTP/1.1 served; the default serves h2c', async () => {
    const preface = async (s: Sidecar): Promise<string> =>
      new Promise((resolve) => {
        const c = netConnect(port(s), '127.0.0.1', () => c.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
        let got = '';
        c.on('data', (d: Buffer) => (got += d.toString('latin1')));
        c.on('close', () => resolve(got));
        c.on('error', () => resolve(got));
        setTimeout(() => c.destroy(), 3000).unref();
      });
    const off = await startSidecar({ ns, upstream: echo.url, options: 'h2c: true\n', args: ['--h2c', 'false'] });
    const on = await startSidecar({ ns, upstream: echo.url, options: 'h2c: false\n', args: ['--h2c', 'true'] });
    try {
      expect(await preface(off)).toMatch(/^HTTP\/1\.1 400/);
      expect((await fetch(`${off.gw}/x`)).status).toBe(200);
      const session = h2connect(on.gw);
      try {
        expect((await h2get(session, '/x')).headers[':status']).toBe(200);
      } finally {
        session.close();
      }
    } finally {
      await Promise.all([off.stop(), on.stop()]);
    }
  }, 40_000);

  test("a --tls-key that is not the --tls-cert's key: exit 1, both flags and files named, and the rule", async () => {
    const stranger = issue(certs, 'ca', 'stranger', 'localhost');
    const r = await refusedSidecar(echo.url, ns, ['--tls-cert', first.cert, '--tls-key', stranger.key]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      `gw: --tls-cert (${first.cert}) and --tls-key (${stranger.key}): key does not match certificate`,
    );
  }, 15_000);

  test.each([
    [['--tls-cert', '/x.crt'], /--tls-cert and --tls-key go together/],
    [['--h2c', 'maybe'], /--h2c: true or false/],
    [['--tls-client-ca', '/ca.crt'], /--tls-client-ca and --tls-min-version need --tls-cert and --tls-key/],
    [
      ['--tls-cert', '/nonexistent/tls.crt', '--tls-key', '/nonexistent/tls.key'],
      /--tls-cert: cannot read \/nonexistent\/tls\.crt/,
    ],
  ])(
    'bad flags %p → exit 1, one line naming the flag or file',
    async (args, msg) => {
      const r = await refusedSidecar(echo.url, ns, args);
      expect(r.code).toBe(1);
      expect(r.out).toMatch(msg);
    },
    15_000,
  );
});
