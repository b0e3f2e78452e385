/**
 * The request path's metrics (sidecar/hot-metrics.ts) must expose exactly what prom-client's own
 * Counter and Histogram expose for the same observations: same lines, same order, same numbers.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from '../../../sidecar/hot-metrics.js';

const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1];
const OBS: [string, number][] = [
  ['a', 0.0004],
  ['a', 0.001],
  ['b', 0.003],
  ['a', 0.2],
  ['b', 0.05],
  ['a', 0.0099],
  ['b', 7],
];

function pair(): { hot: Registry; ref: Registry } {
  return { hot: new Registry(), ref: new Registry() };
}

test('a labelled counter exposes what a prom-client Counter does', async () => {
  const { hot, ref } = pair();
  const h = new HotCounter('t_requests_total', 'Requests', ['api', 'code'], hot);
  const c = new Counter({ name: 't_requests_total', help: 'Requests', labelNames: ['api', 'code'], registers: [ref] });
  for (const [api] of OBS) {
    h.labels({ api, code: '2xx' }).inc();
    c.labels({ api, code: '2xx' }).inc();
  }
  h.labels({ code: '4xx', api: 'a' }).inc(3);
  c.labels({ api: 'a', code: '4xx' }).inc(3);
  expect(await hot.metrics()).toBe(await ref.metrics());
  expect(await hot.metrics()).toContain('t_requests_total{api="a",code="2xx"} 4');
});

test('a labelled histogram exposes what a prom-client Histogram does', async () => {
  const { hot, ref } = pair();
  const h = new HotHistogram('t_up_seconds', 'Upstream', ['api'], BUCKETS, hot);
  const p = new Histogram({
    name: 't_up_seconds',
    help: 'Upstream',
    labelNames: ['api'],
    buckets: BUCKETS,
    registers: [ref],
  });
  for (const [api, v] of OBS) {
    h.labels({ api }).observe(v);
    p.labels({ api }).observe(v);
  }
  expect(await hot.metrics()).toBe(await ref.metrics());
  expect(await hot.metrics()).toContain('t_up_seconds_bucket{le="0.05",api="b"} 2');
});

test('an unlabelled histogram: zeros before the first observation, then the same as prom-client', async () => {
  const { hot, ref } = pair();
  const h = new HotHistogram('t_decision_seconds', 'Decision', [], BUCKETS, hot);
  const p = new Histogram({ name: 't_decision_seconds', help: 'Decision', buckets: BUCKETS, registers: [ref] });
  expect(await hot.metrics()).toBe(await ref.metrics());
  for (const [, v] of OBS) {
    h.observe(v);
    p.observe(v);
  }
  expect(await hot.metrics()).toBe(await ref.metrics());
  expect(await hot.metrics()).toContain('t_decision_seconds_count 7');
});

test('reset zeroes every series and keeps the series the proxy holds', async () => {
  const reg = new Registry();
  const h = new HotHistogram('t_r_seconds', 'R', ['api'], BUCKETS, reg);
  const s = h.labels({ api: 'a' });
  s.observe(0.002);
  reg.resetMetrics();
  expect(await reg.metrics()).toContain('t_r_seconds_count{api="a"} 0');
  s.observe(0.002);
  expect(await reg.metrics()).toContain('t_r_seconds_count{api="a"} 1');
});

test('an unknown or a missing label is refused', () => {
  const h = new HotCounter('t_c_total', 'C', ['api'], new Registry());
  expect(() => h.labels({ api: 'a', key: 'secret' })).toThrow(/unknown label key/);
  expect(() => h.labels({})).toThrow(/label api missing/);
});
