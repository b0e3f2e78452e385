/**
 * The gateway listener's TLS files on the real `gw standalone` (docs/proxy.md, "TLS and HTTP/2";
 * docs/standalone.md, "TLS on the gateway listener"): the `--tls-cert`/`--tls-key` flags serving HTTPS over
 * HTTP/1.1 and h2; files that cannot serve stopping the start with one line naming the flag or option, the
 * file and the rule (a missing file, a key that is not the certificate's, by flags and by the file, an
 * unreadable key); on a reload, a key that does not match refused with an error line while the previous
 * certificate goes on serving, then a matching pair taken.
 */
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as h2connect } from 'node:http2';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { Agent, request } from 'undici';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { gatewayCerts, issue, servedFingerprint, type Issued } from '../../helpers/certs.js';
import {
  CLI,
  apiManifest,
  cleanup,
  permissionsApply,
  startStandalone,
  tempDir,
  type Standalone,
} from '../../helpers/standalone.js';

describe('gateway TLS files: standalone flags, refused pairs at start and on reload', () => {
  let echo: { server: Server; url: string };
  let certs: string;
  let res: string;
  let ca: Issued;
  let gwCert: Issued;
  let other: Issued;
  const running: Standalone[] = [];
  const port = (g: Standalone): number => Number(new URL(g.gateway).port);

  beforeAll(async () => {
    echo = await startEcho();
    ({ dir: certs, ca, gw: gwCert } = gatewayCerts());
    other = issue(certs, 'ca', 'other', 'localhost');
    res = tempDir();
    writeFileSync(
      join(res, 'r.yaml'),
      apiManifest('e', `use_keyless: true\nproxy: {listen_path: /e/, target_url: ${echo.url}}`),
    );
  }, 30_000);

  afterAll(async () => {
    await Promise.all(running.map((g) => g.stop()));
    await new Promise((r) => echo?.server.close(r));
    for (const d of [res, certs]) if (d) cleanup(d);
  });

  /** `gw standalone` with `args` that must not start: its exit code and everything it wrote. */
  async function refusedStart(
    args: string[],
    o: { permissions?: boolean } = {},
  ): Promise<{ code: number | null; out: string }> {
    const [cmd, ...prefix] = [...(o.permissions ? permissionsApply() : []), process.execPath];
    const proc = spawn(
      cmd!,
      [
        ...prefix,
        CLI,
        'standalone',
        '--resources',
        res,
        '--listen',
        '127.0.0.1:0',
        '--admin-listen',
        '127.0.0.1:0',
        ...args,
      ],
      {
        env: { ...process.env, GW_SECRET: 's', GW_ACCESS_TOKENS: 't', GW_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const kill = setTimeout(() => proc.kill('SIGKILL'), 15_000);
    const code = await new Promise<number | null>((r) => proc.once('exit', r));
    clearTimeout(kill);
    return { code, out };
  }

  test('--tls-cert/--tls-key: HTTPS over HTTP/1.1 and h2 (ALPN), the ready line says https', async () => {
    const g = await startStandalone(res, ['--tls-cert', gwCert.cert, '--tls-key', gwCert.key]);
    running.push(g);
    expect(g.output()).toMatch(/gw standalone ready: gateway https:\/\//);
    expect(await servedFingerprint(port(g), ca.cert)).toBe(gwCert.fingerprint);
    const agent = new Agent({
      connect: { ca: readFileSync(ca.cert), servername: 'localhost', ALPNProtocols: ['http/1.1'] },
    });
    try {
      const r = await request(`https://127.0.0.1:${port(g)}/e/one`, { dispatcher: agent });
      const body = (await r.body.json()) as { headers: Record<string, string> };
      expect(r.statusCode).toBe(200);
      expect(body.headers['x-forwarded-proto']).toBe('https');
    } finally {
      await agent.close();
    }
    const session = h2connect(`https://127.0.0.1:${port(g)}`, { ca: readFileSync(ca.cert), servername: 'localhost' });
    try {
      const status = await new Promise<unknown>((resolve, reject) => {
        session.on('error', reject);
        const r = session.request({ ':path': '/e/two' });
        let s: unknown;
        r.on('response', (h) => (s = h[':status']));
        r.resume();
        r.on('close', () => resolve(s));
        r.on('error', reject);
      });
      expect(status).toBe(200);
      expect(session.alpnProtocol).toBe('h2');
    } finally {
      session.close();
    }
  });

  test('a missing file given by flag: exit 1, the flag and the file named', async () => {
    const r = await refusedStart(['--tls-cert', join(certs, 'missing.crt'), '--tls-key', gwCert.key]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`gw: --tls-cert: cannot read ${join(certs, 'missing.crt')}: ENOENT`);
  });

  test("a key that is not the certificate's: exit 1 naming both flags (or options) and files, and the rule", async () => {
    const byFlags = await refusedStart(['--tls-cert', gwCert.cert, '--tls-key', other.key]);
    expect(byFlags.code).toBe(1);
    expect(byFlags.out).toContain(
      `gw: --tls-cert (${gwCert.cert}) and --tls-key (${other.key}): key does not match certificate`,
    );
    expect(byFlags.out).not.toContain('key values mismatch');
    const conf = join(certs, 'mismatch.yaml');
    writeFileSync(conf, `tls: {cert_file: ${gwCert.cert}, key_file: ${other.key}}\n`);
    const byFile = await refusedStart(['--config', conf]);
    expect(byFile.code).toBe(1);
    expect(byFile.out).toContain(
      `gw: tls.cert_file (${gwCert.cert}) and tls.key_file (${other.key}): key does not match certificate`,
    );
    // a certificate file that holds a key
    const notCert = await refusedStart(['--tls-cert', gwCert.key, '--tls-key', gwCert.key]);
    expect(notCert.code).toBe(1);
    expect(notCert.out).toContain(`gw: --tls-cert: ${gwCert.key} holds no PEM certificate`);
  });

  test('an unreadable key file (mode 000): exit 1 naming the option and the file', async () => {
    const key = join(certs, 'unreadable.key');
    copyFileSync(gwCert.key, key);
    chmodSync(key, 0o000);
    const conf = join(certs, 'unreadable.yaml');
    writeFileSync(conf, `tls: {cert_file: ${gwCert.cert}, key_file: ${key}}\n`);
    const r = await refusedStart(['--config', conf], { permissions: true });
    expect(r.code).toBe(1);
    expect(r.out).toContain(`gw: tls.key_file: cannot read ${key}: EACCES`);
  });

  test('gw standalone --help lists the TLS flags', async () => {
    const proc = spawn(process.execPath, [CLI, 'standalone', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    expect(await new Promise((r) => proc.once('exit', r))).toBe(0);
    for (const flag of [
      '--tls-cert <file>',
      '--tls-key <file>',
      '--tls-client-ca <file>',
      '--tls-min-version <version>',
    ])
      expect(out).toContain(flag);
  });

  test('on a reload, a key that does not match is refused with an error line; the previous certificate goes on serving; a matching pair is then taken', async () => {
    const served = join(certs, 'served');
    mkdirSync(served);
    copyFileSync(gwCert.cert, join(served, 'tls.crt'));
    copyFileSync(gwCert.key, join(served, 'tls.key'));
    const conf = join(certs, 'served.yaml');
    writeFileSync(conf, `tls: {cert_file: ${join(served, 'tls.crt')}, key_file: ${join(served, 'tls.key')}}\n`);
    const g = await startStandalone(res, ['--config', conf]);
    running.push(g);
    expect(await servedFingerprint(port(g), ca.cert)).toBe(gwCert.fingerprint);
    // only the key replaced: it does not match the certificate still there
    copyFileSync(other.key, join(served, 'tls.key'));
    const refusal = (): string | undefined =>
      g
        .output()
        .split('\n')
        .find((l) => l.includes('were refused'));
    const t0 = Date.now();
    while (refusal() === undefined && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 100));
    const line = JSON.parse(refusal() ?? '{}') as Record<string, unknown>;
    expect(line).toMatchObject({ level: 50 });
    expect(String(line.err)).toContain('key does not match certificate');
    expect(String(line.err)).toContain(join(served, 'tls.key'));
    // two reload periods later: still the previous certificate, to new connections, and serving
    await new Promise((r) => setTimeout(r, 4500));
    expect(await servedFingerprint(port(g), ca.cert)).toBe(gwCert.fingerprint);
    const agent = new Agent({ connect: { ca: readFileSync(ca.cert), servername: 'localhost' } });
    try {
      const r = await request(`https://127.0.0.1:${port(g)}/e/still`, { dispatcher: agent });
      await r.body.dump();
      expect(r.statusCode).toBe(200);
    } finally {
      await agent.close();
    }
    // once per content: the same refused pair is not logged again
    expect(
      g
        .output()
        .split('\n')
        .filter((l) => l.includes('were refused')),
    ).toHaveLength(1);
    // the certificate that goes with the key: the new pair served
    copyFileSync(other.cert, join(served, 'tls.crt'));
    const t1 = Date.now();
    let fp = '';
    while (Date.now() - t1 < 10_000) {
      fp = await servedFingerprint(port(g), ca.cert);
      if (fp === other.fingerprint) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(fp).toBe(other.fingerprint);
    expect(g.proc.exitCode).toBeNull();
  }, 40_000);
});
