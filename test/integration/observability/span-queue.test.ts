/**
 * lib/trace/otel.ts as the exporter's caller: recorded spans reach a real OTLP/HTTP receiver with their
 * ids, parents, times, attributes and status; unsampled parents give non-recording spans; the queue is
 * bounded (drops, never waits) and shutdown exports what is queued.
 */
import { startTracing, type Tracing } from '../../../lib/trace/otel.js';
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('recorded spans and their export queue', () => {
  let rx: OtlpReceiver;
  let tracing: Tracing | undefined;
  const failures: number[] = [];
  const start = (o: { maxQueueSize?: number; exportDelayMs?: number; samplingRatio?: number } = {}) =>
    startTracing({
      endpoint: rx.url,
      samplingRatio: o.samplingRatio ?? 1,
      serviceName: 'span-queue-test',
      maxQueueSize: o.maxQueueSize,
      exportDelayMs: o.exportDelayMs ?? 100,
      onExportFailure: (_e, n) => failures.push(n),
      logExportFailure: () => undefined,
    });

  beforeEach(async () => {
    rx = await startOtlpReceiver();
  });
  afterEach(async () => {
    await tracing?.shutdown();
    tracing = undefined;
    await rx.close();
  });

  test('a server span continuing a sampled traceparent: its trace, parent, tracestate, attributes, times and status', async () => {
    tracing = await start();
    const before = BigInt(Date.now()) * 1_000_000n;
    const span = tracing.startServer('GET /api/', `00-${TRACE}-${PARENT}-01`, 'vendor=1', { 'url.path': '/api/x' });
    expect(span.isRecording()).toBe(true);
    const tp = tracing.traceparentOf(span);
    expect(tp).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    span.setAttribute('http.response.status_code', 503);
    span.setStatus({ code: 2 });
    await sleep(5);
    span.end();
    span.end(); // a second end changes nothing and queues nothing
    span.setAttribute('late', 'ignored');
    const got = await rx.waitFor((s) => s.name === 'GET /api/', 5000);
    expect(got.traceId).toBe(TRACE);
    expect(got.parentSpanId).toBe(PARENT);
    expect(got.spanId).toBe(tp.slice(36, 52));
    expect(got.kind).toBe(2); // OTLP SPAN_KIND_SERVER
    expect(got.service).toBe('span-queue-test');
    expect(got.traceState).toBe('vendor=1');
    expect(got.attributes).toEqual({ 'url.path': '/api/x', 'http.response.status_code': 503 });
    expect(got.status.code).toBe(2);
    expect(got.startNs).toBeGreaterThanOrEqual(before - 5_000_000n);
    expect(got.endNs - got.startNs).toBeGreaterThanOrEqual(4_000_000n);
    await sleep(300);
    expect(rx.spans.filter((s) => s.name === 'GET /api/')).toHaveLength(1);
  });

  test('an unsampled parent gives a non-recording span in its trace; a child follows its parent', async () => {
    tracing = await start();
    const unsampled = tracing.startServer('GET /x/', `00-${TRACE}-${PARENT}-00`, undefined, {});
    expect(unsampled.isRecording()).toBe(false);
    expect(tracing.traceparentOf(unsampled)).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
    const quietChild = tracing.startChild('gw.rate_limit', unsampled);
    expect(quietChild.isRecording()).toBe(false);
    expect(quietChild.spanContext().traceId).toBe(TRACE);
    unsampled.end();
    quietChild.end();

    const root = tracing.startServer('GET /y/', undefined, undefined, {});
    const child = tracing.startChild('gw.session_lookup', root, { 'gw.kind': 'x' });
    child.end();
    root.end();
    const c = await rx.waitFor((s) => s.name === 'gw.session_lookup', 5000);
    const r = await rx.waitFor((s) => s.name === 'GET /y/', 5000);
    expect(c.traceId).toBe(r.traceId);
    expect(c.parentSpanId).toBe(r.spanId);
    expect(c.kind).toBe(1); // OTLP SPAN_KIND_INTERNAL
    expect(c.attributes).toEqual({ 'gw.kind': 'x' });
    expect(r.parentSpanId).toBe('');
    await sleep(300);
    expect(rx.spans.some((s) => s.name === 'GET /x/' || s.traceId === TRACE)).toBe(false);
  });

  test('a root child span is drawn at the sampling ratio: ratio 0 records none', async () => {
    tracing = await start({ samplingRatio: 0 });
    for (let i = 0; i < 20; i++) {
      const s = tracing.startChild('reconcile Config', undefined, { 'gw.kind': 'Config' });
      expect(s.isRecording()).toBe(false);
      s.end();
    }
    await sleep(400);
    expect(rx.spans).toHaveLength(0);
  });

  test('the queue holds at most maxQueueSize spans between exports (the rest dropped); shutdown exports what is queued', async () => {
    tracing = await start({ maxQueueSize: 3, exportDelayMs: 60_000 });
    for (let i = 0; i < 10; i++) tracing.startServer(`span ${i}`, undefined, undefined, {}).end();
    await sleep(200);
    expect(rx.spans).toHaveLength(0); // not before the export timer
    await tracing.shutdown();
    tracing = undefined;
    expect(rx.spans.map((s) => s.name)).toEqual(['span 0', 'span 1', 'span 2']);
    expect(failures).toEqual([]);
  });

  test('a full batch (512 spans) leaves at once, before the export timer', async () => {
    tracing = await start({ exportDelayMs: 60_000 });
    for (let i = 0; i < 512; i++) tracing.startServer('full', undefined, undefined, {}).end();
    const end = Date.now() + 5000;
    while (rx.spans.length < 512 && Date.now() < end) await sleep(20);
    expect(rx.spans).toHaveLength(512);
    expect(rx.contentTypes).toHaveLength(1);
  });

  test('spans that end during an export wait for the next batch: one export per period, not a trickle', async () => {
    tracing = await start({ exportDelayMs: 250 });
    const t0 = Date.now();
    while (Date.now() - t0 < 1300) {
      tracing.startServer('steady', undefined, undefined, {}).end();
      await sleep(2);
    }
    await sleep(400);
    const made = rx.spans.length;
    expect(made).toBeGreaterThan(100);
    // about one export per 250 ms over ~1.3 s (the first waits for its timer): a trickle would be dozens
    expect(rx.contentTypes.length).toBeGreaterThanOrEqual(3);
    expect(rx.contentTypes.length).toBeLessThanOrEqual(8);
  });
});
