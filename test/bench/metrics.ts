/**
 * The request path's metric writes, hand-written series (sidecar/hot-metrics.ts) against prom-client's own
 * labelled children (`counter.labels(...)`, `histogram.labels(...)`, resolved once per api as the proxy
 * does): ns per request for what one request writes (one gw_requests_total child inc, one
 * gw_upstream_seconds child observe, one unlabelled gw_decision_seconds observe), interleaved rounds, the
 * lowest of each. Run by run.ts pinned to the proxy core; prints one JSON object.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from '../../sidecar/hot-metrics.js';

const DECISION = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const UPSTREAM = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5];
const APIS = 20;
const N = 2_000_000;

type Writer = (i: number) => void;

function handWritten(): Writer {
  const r = new Registry();
  const requests = new HotCounter('gw_requests_total', 'h', ['api', 'code'], r);
  const decision = new HotHistogram('gw_decision_seconds', 'h', [], DECISION, r);
  const upstream = new HotHistogram('gw_upstream_seconds', 'h', ['api'], UPSTREAM, r);
  const c = Array.from({ length: APIS }, (_, a) => requests.labels({ api: `api-${a}`, code: '2xx' }));
  const u = Array.from({ length: APIS }, (_, a) => upstream.labels({ api: `api-${a}` }));
  return (i) => {
    const a = i % APIS;
    c[a]!.inc();
    decision.observe((i % 1000) * 1e-6);
    u[a]!.observe((i % 100) * 1e-4);
  };
}

function promClient(): Writer {
  const r = new Registry();
  const requests = new Counter({ name: 'gw_requests_total', help: 'h', labelNames: ['api', 'code'], registers: [r] });
  const decision = new Histogram({ name: 'gw_decision_seconds', help: 'h', buckets: DECISION, registers: [r] });
  const upstream = new Histogram({
    name: 'gw_upstream_seconds',
    help: 'h',
    labelNames: ['api'],
    buckets: UPSTREAM,
    registers: [r],
  });
  const c = Array.from({ length: APIS }, (_, a) => requests.labels({ api: `api-${a}`, code: '2xx' }));
  const u = Array.from({ length: APIS }, (_, a) => upstream.labels({ api: `api-${a}` }));
  return (i) => {
    const a = i % APIS;
    c[a]!.inc();
    decision.observe((i % 1000) * 1e-6);
    u[a]!.observe((i % 100) * 1e-4);
  };
}

function time(w: Writer): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) w(i);
  return Number(process.hrtime.bigint() - t) / N;
}

const variants = { hand_written: handWritten(), prom_client_children: promClient() };
for (const w of Object.values(variants)) for (let i = 0; i < 300_000; i++) w(i); // warm-up (JIT)
const best: Record<string, number> = {};
for (let round = 0; round < 5; round++)
  for (const [k, w] of Object.entries(variants)) best[k] = Math.min(best[k] ?? Infinity, time(w));
console.log(JSON.stringify({ ns_per_request: best }));
