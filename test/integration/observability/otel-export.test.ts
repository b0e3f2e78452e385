/**
 * docs/contract.md#observability span export through the real `gw standalone`: the server span of each request reaches an
 * OTLP/HTTP receiver with its attributes, continues the client's trace, has a child span for the store's
 * round trip; sampling_ratio 0 records no new trace; an unreachable collector changes no answer.
 */
import { writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { sha256hex } from '../../../lib/hash.js';
import { freePort } from '../../harness/ports.js';
import { redisUrl } from '../../helpers/redis.js';
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js';
import { eventually } from '../../helpers/sidecar.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

async function get(url: string, headers: Record<string, string> = {}) {
  const r = await request(url, { headers });
  const text = await r.body.text();
  return { status: r.statusCode, text, headers: r.headers };
}

const resources = (upstream: string): string => `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: traced}
spec:
  proxy: {listen_path: /traced/, target_url: ${upstream}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: open}
spec:
  use_keyless: true
  proxy: {listen_path: /open/, target_url: ${upstream}}
  global_rate_limit: {rate: 1, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: down}
spec:
  use_keyless: true
  proxy: {listen_path: /down/, target_url: 'http://127.0.0.1:9'}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: k}
spec:
  key_hash: ${sha256hex('otel-key-0001')}
  rate: 100
  per: 60
`;

describe('OpenTelemetry span export (standalone)', () => {
  let echo: { server: Server; url: string };
  let rx: OtlpReceiver;
  const started: Standalone[] = [];
  const dirs: string[] = [];

  async function gateway(config: string, redis = false): Promise<Standalone> {
    const dir = tempDir();
    const cfg = tempDir('gw-cfg-');
    dirs.push(dir, cfg);
    writeFileSync(join(dir, 'r.yaml'), resources(echo.url));
    writeFileSync(join(cfg, 'gw.yaml'), config);
    const gw = await startStandalone(
      dir,
      ['--config', join(cfg, 'gw.yaml'), ...(redis ? ['--redis', redisUrl()] : [])],
      {
        GW_LOG_LEVEL: 'info',
      },
    );
    started.push(gw);
    return gw;
  }

  beforeAll(async () => {
    echo = await startEcho();
    rx = await startOtlpReceiver();
  });
  afterAll(async () => {
    for (const g of started) await g.stop();
    echo?.server.close();
    await rx?.close();
    for (const d of dirs) cleanup(d);
  });

  test("a server span per request, with the HTTP attributes, gw.api_id and gw.rate_limit.decision; the upstream's parent is that span; a store round trip is a child span", async () => {
    const gw = await gateway(`opentelemetry: {enabled: true, endpoint: ${rx.url}}\n`, true);
    const r = await get(`${gw.gateway}/traced/items?x=1`, {
      authorization: 'otel-key-0001',
      traceparent: `00-${TRACE}-${PARENT}-01`,
    });
    expect(r.status).toBe(200);
    const seen = (JSON.parse(r.text) as { headers: IncomingHttpHeaders }).headers;
    const upstreamParent = String(seen.traceparent).split('-')[2];
    const span = await rx.waitFor((s) => s.traceId === TRACE && s.kind === 2, 10_000, 'server span');
    expect(span.service).toBe('gw-standalone');
    expect(span.parentSpanId).toBe(PARENT);
    expect(span.spanId).toBe(upstreamParent);
    expect(span.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': '/traced/items',
      'http.response.status_code': 200,
      'http.route': '/traced/',
      'server.address': '127.0.0.1',
      'client.address': '127.0.0.1',
      'gw.api_id': 'traced',
      'gw.rate_limit.decision': 'allow',
    });
    expect(JSON.stringify(span.attributes)).not.toContain('otel-key-0001');
    expect(rx.contentTypes[0]).toMatch(/application\/json/);
    // the key's session came from Redis: the request waited on the store, a child span of the server span
    const child = await rx.waitFor((s) => s.traceId === TRACE && s.parentSpanId === span.spanId, 10_000, 'store span');
    expect(child.name).toMatch(/^gw\./);

    // a refusal is a span too, with its decision; a request without a traceparent starts a trace
    expect((await get(`${gw.gateway}/open/a`)).status).toBe(200);
    expect((await get(`${gw.gateway}/open/a`)).status).toBe(429);
    const limited = await rx.waitFor(
      (s) => s.attributes['gw.rate_limit.decision'] === 'api_limited',
      10_000,
      '429 span',
    );
    expect(limited.parentSpanId).toBe('');
    expect(limited.attributes['http.response.status_code']).toBe(429);
    expect(limited.attributes['error.type']).toBeUndefined();

    // HTTP semantic conventions: a method they do not name is _OTHER (its name kept apart, the span named
    // "HTTP …"); a 5xx answer is an error whose type is its status code
    const other = await request(`${gw.gateway}/down/dav`, { method: 'PROPFIND' });
    await other.body.dump();
    expect(other.statusCode).toBe(502);
    const span502 = await rx.waitFor((s) => s.attributes['url.path'] === '/down/dav', 10_000, 'PROPFIND span');
    expect(span502.name).toBe('HTTP /down/');
    expect(span502.attributes).toMatchObject({
      'http.request.method': '_OTHER',
      'http.request.method_original': 'PROPFIND',
      'http.response.status_code': 502,
      'error.type': '502',
    });
    expect(span502.status).toMatchObject({ code: 2 });
  });

  test('sampling_ratio 0: no new trace is recorded; a sampled parent is still followed, an unsampled one is not; the header still goes upstream', async () => {
    const gw = await gateway(`opentelemetry: {enabled: true, endpoint: ${rx.url}, sampling_ratio: 0}\n`);
    const other = '0123456789abcdef0123456789abcdef';
    const r = await get(`${gw.gateway}/open/none`);
    const root = String((JSON.parse(r.text) as { headers: IncomingHttpHeaders }).headers.traceparent);
    expect(root).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    // an unsampled parent is followed too: no span, its trace id and flags go on with a new parent id
    const quiet = 'fedcba9876543210fedcba9876543210';
    const u = await get(`${gw.gateway}/traced/unsampled`, {
      traceparent: `00-${quiet}-${PARENT}-00`,
      authorization: 'otel-key-0001',
    });
    const next = String((JSON.parse(u.text) as { headers: IncomingHttpHeaders }).headers.traceparent);
    expect(next).toMatch(new RegExp(`^00-${quiet}-[0-9a-f]{16}-00$`));
    expect(next.split('-')[2]).not.toBe(PARENT);
    await get(`${gw.gateway}/open/followed`, { traceparent: `00-${other}-${PARENT}-01` });
    await rx.waitFor((s) => s.traceId === other, 10_000, 'span of a sampled parent');
    expect(rx.spans.some((s) => s.traceId === root.split('-')[1] || s.traceId === quiet)).toBe(false);
  });

  test('an unreachable collector changes no answer: counted in gw_trace_export_failures_total, one log line', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const gw = await gateway(`opentelemetry: {enabled: true, endpoint: ${dead}}\naccess_logs: {enabled: false}\n`);
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++)
      statuses.push((await get(`${gw.gateway}/traced/x`, { authorization: 'otel-key-0001' })).status);
    expect(statuses).toEqual(Array(20).fill(200));
    await eventually(
      async () => {
        const m = await get(`${gw.admin}/metrics`);
        return /gw_trace_export_failures_total [1-9]/.test(m.text);
      },
      20_000,
      'an export failure counted',
    );
    expect((await get(`${gw.gateway}/traced/y`, { authorization: 'otel-key-0001' })).status).toBe(200);
    const lines = gw
      .output()
      .split('\n')
      .filter((l) => l.includes('span export to the OpenTelemetry collector failed'));
    expect(lines).toHaveLength(1);
  });
});
