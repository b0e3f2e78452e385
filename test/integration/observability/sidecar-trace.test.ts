/**
 * docs/contract.md#observability through the real `gw sidecar` (kube-apiserver config, Redis sessions): the upstream sees the
 * client's trace id with the sidecar's span as parent, or a new trace; the span reaches the collector; the
 * access line carries the trace id.
 */
import type { IncomingHttpHeaders, Server } from 'node:http';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { request } from 'undici';
import { sha256hex } from '../../../lib/hash.js';
import { RedisSessionStore } from '../../../stores/sessions-redis.js';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { freshNamespace } from '../../helpers/kube.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js';
import { configOf, eventually, startSidecar, writeConfigMap, type Sidecar } from '../../helpers/sidecar.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const TP = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;

describe('trace context and spans through gw sidecar', () => {
  let ns: string;
  let echo: { server: Server; url: string };
  let rx: OtlpReceiver;
  let sc: Sidecar;
  let redis: Redis;

  beforeAll(async () => {
    ns = await freshNamespace('otel');
    redis = await freshRedis();
    echo = await startEcho();
    rx = await startOtlpReceiver();
    await writeConfigMap(ns, configOf(ns, [{ name: 'app', path: '/', rate: 100, per: 60, keyless: false }]));
    const store = new RedisSessionStore(redis, pino({ level: 'silent' }));
    await store.put(sha256hex('sidecar-otel-key'), { namespace: ns, session: { rate: 100, per: 60 } });
    sc = await startSidecar({
      ns,
      upstream: echo.url,
      redis: redisUrl(),
      options: `opentelemetry: {enabled: true, endpoint: ${rx.url}}\naccess_logs: {enabled: true}\n`,
    });
  });
  afterAll(async () => {
    await sc?.stop();
    echo?.server.close();
    await rx?.close();
    redis?.disconnect();
  });

  async function upstreamTraceparent(headers: Record<string, string>): Promise<RegExpExecArray> {
    const r = await request(`${sc.gw}/orders?id=7`, { headers: { authorization: 'sidecar-otel-key', ...headers } });
    expect(r.statusCode).toBe(200);
    const seen = ((await r.body.json()) as { headers: IncomingHttpHeaders }).headers;
    const m = TP.exec(String(seen.traceparent));
    expect(m).not.toBeNull();
    return m!;
  }

  test('with a traceparent: same trace id, the sidecar span as the new parent, exported with its attributes', async () => {
    const m = await upstreamTraceparent({ traceparent: `00-${TRACE}-${PARENT}-01` });
    expect(m[1]).toBe(TRACE);
    expect(m[2]).not.toBe(PARENT);
    const span = await rx.waitFor((s) => s.spanId === m[2], 10_000, 'sidecar span');
    expect(span).toMatchObject({ service: 'gw-sidecar', traceId: TRACE, parentSpanId: PARENT, kind: 2 });
    expect(span.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': '/orders',
      'http.response.status_code': 200,
      'gw.api_id': expect.any(String),
      'gw.rate_limit.decision': 'allow',
    });
  });

  test('without one: a new trace, rooted at the sidecar span; the access line names it', async () => {
    const m = await upstreamTraceparent({});
    expect(m[1]).not.toBe(TRACE);
    const span = await rx.waitFor((s) => s.traceId === m[1] && s.kind === 2, 10_000, 'root span');
    expect(span.parentSpanId).toBe('');
    expect(span.spanId).toBe(m[2]);
    await eventually(async () => sc.out().includes(`"trace_id":"${m[1]}"`), 5_000, 'access line');
    const line = sc
      .out()
      .split('\n')
      .find((l) => l.includes(`"trace_id":"${m[1]}"`))!;
    expect(JSON.parse(line)).toMatchObject({
      msg: 'access',
      path: '/orders',
      status: 200,
      decision: 'allow',
      key: sha256hex('sidecar-otel-key').slice(0, 8),
    });
    expect(sc.out()).not.toContain('sidecar-otel-key');
  });
});
