/** The webhook's HTTPS server: routes, refusals, metrics and certificate rotation (certs from openssl). */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, utimesSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { pino } from 'pino';
import { createWebhookServer } from '../../../webhook/server.js';
import { defaultInjectOptions } from '../../../webhook/inject.js';

let dir: string;
let srv: ReturnType<typeof createWebhookServer>;
let port = 0;

function selfSigned(name: string, cn: string): void {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      join(dir, `${name}.key`),
      '-out',
      join(dir, `${name}.crt`),
      '-days',
      '1',
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
}

function call(method: string, path: string, body?: string): Promise<{ status: number; text: string; peerCn: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        rejectUnauthorized: false,
        agent: false,
        headers: body ? { 'content-type': 'application/json' } : {},
      },
      (res) => {
        const cert =
          res.socket && 'getPeerX509Certificate' in res.socket
            ? (
                res.socket as unknown as { getPeerX509Certificate(): X509Certificate | undefined }
              ).getPeerX509Certificate()
            : undefined;
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, peerCn: cert?.subject ?? '' }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gw-wh-unit-'));
  selfSigned('tls', 'first');
  srv = createWebhookServer({
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    inject: defaultInjectOptions,
    logger: pino({ level: 'silent' }),
    reloadMs: 50,
  });
  await new Promise<void>((r) => srv.server.listen(0, '127.0.0.1', () => r()));
  port = (srv.server.address() as { port: number }).port;
});

afterAll(async () => {
  srv.close();
  await new Promise((r) => srv.server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe('webhook HTTPS server', () => {
  test('/healthz and /readyz answer 200, /metrics counts admissions', async () => {
    expect((await call('GET', '/healthz')).status).toBe(200);
    expect((await call('GET', '/readyz')).status).toBe(200);
    const review = {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'x',
        kind: { group: '', version: 'v1', kind: 'Pod' },
        operation: 'CREATE',
        object: {
          metadata: { annotations: { 'gw.io/inject': 'true' } },
          spec: { containers: [{ name: 'a', ports: [{ name: 'http', containerPort: 80 }] }] },
        },
      },
    };
    const r = await call('POST', '/mutate', JSON.stringify(review));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toMatchObject({ response: { uid: 'x', allowed: true, patchType: 'JSONPatch' } });
    expect((await call('GET', '/metrics')).text).toMatch(/gw_webhook_admissions_total\{outcome="injected"\} 1/);
  });

  test('refusals: unknown path 404, GET /mutate 405, non-JSON 400, bad envelope 400', async () => {
    expect((await call('GET', '/nope')).status).toBe(404);
    expect((await call('GET', '/mutate')).status).toBe(405);
    expect((await call('POST', '/mutate', '{not json')).status).toBe(400);
    const bad = await call(
      'POST',
      '/mutate',
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview' }),
    );
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/apiVersion/);
    // a review nested deeper than 64 levels is refused by the scan before it is parsed
    const deep = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"d","operation":"CREATE","object":{"spec":{"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}}}}`;
    const refused = await call('POST', '/mutate', deep);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text)).toEqual({ error: expect.stringMatching(/^body nested deeper than 64 levels/) });
  });

  test('a rotated certificate is served without a restart', async () => {
    expect((await call('GET', '/healthz')).peerCn).toMatch(/CN=first/);
    selfSigned('next', 'second');
    renameSync(join(dir, 'next.key'), join(dir, 'tls.key'));
    renameSync(join(dir, 'next.crt'), join(dir, 'tls.crt'));
    const later = new Date(Date.now() + 5000);
    utimesSync(join(dir, 'tls.crt'), later, later);
    const deadline = Date.now() + 5000;
    let cn = '';
    while (Date.now() < deadline && !/CN=second/.test(cn)) {
      await new Promise((r) => setTimeout(r, 60));
      cn = (await call('GET', '/healthz')).peerCn;
    }
    expect(cn).toMatch(/CN=second/);
    expect(readFileSync(join(dir, 'tls.crt'), 'utf8')).toMatch(/BEGIN CERTIFICATE/);
  });
});
