/**
 * Per-request cost of docs/contract.md#observability's features, in process (ns per request, best of 5 runs): the
 * traceparent sent upstream (always on), the server span at sampling_ratio 0.01 (SDK loaded, collector
 * not needed: almost nothing is sampled), and the access-log line (fixed-shape line, batched, pino's
 * asynchronous destination to /dev/null). Compared with a gw request's CPU cost under load
 * (docs/benchmarks.md), these give the throughput ratios the bench cases measure end to end.
 *   node dist/test/bench/observability.js
 */
import { childTraceparent } from '../../lib/trace/trace-context.js';
import { startTracing } from '../../lib/trace/otel.js';
import { createAccessLog } from '../../sidecar/proxy/access-log.js';
const { openSync } = process.getBuiltinModule('node:fs');

const N = 200_000;

function best(fn: (i: number) => void): number {
  let min = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) fn(i);
    min = Math.min(min, Number(process.hrtime.bigint() - t0) / N);
  }
  return min;
}

async function main(): Promise<void> {
  const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  let sink = '';
  const traceparent_continue_ns = best(() => (sink = childTraceparent(incoming)));
  const traceparent_new_ns = best(() => (sink = childTraceparent(undefined)));
  const tracing = await startTracing({
    endpoint: 'http://127.0.0.1:9',
    samplingRatio: 0.01,
    serviceName: 'bench',
    onExportFailure: () => undefined,
    logExportFailure: () => undefined,
  });
  const attrs = { 'http.request.method': 'GET', 'url.path': '/api/x', 'gw.api_id': 'api' };
  const span_001_ns = best(() => {
    const s = tracing.startServer('GET /api/', undefined, undefined, attrs);
    sink = tracing.traceparentOf(s);
    if (s.isRecording()) {
      s.setAttribute('http.response.status_code', 200);
      s.end();
    }
  });
  await tracing.shutdown().catch(() => undefined);
  const log = createAccessLog(openSync('/dev/null', 'w'));
  const access_log_ns = best((i) =>
    log.write({
      api_id: 'api',
      method: 'GET',
      path: '/api/x',
      status: 200,
      latency_ms: 1.234,
      upstream_latency_ms: i % 2 ? 0.987 : null,
      decision: 'allow',
      key: '1bd4c643',
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
      client_ip: '127.0.0.1',
      protocol: '1.1',
    }),
  );
  log.flush();
  process.stdout.write(
    `${JSON.stringify({ traceparent_continue_ns, traceparent_new_ns, span_001_ns, access_log_ns, sink: sink.length })}\n`,
  );
}

void main();
