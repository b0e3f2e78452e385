/**
 * The gateway's stream manager loads the streams code only for a config with `spec.streaming`: until then
 * it holds nothing (no streams, no stream metrics); from the first such config it runs them as the manager
 * does, with its metrics in the registry it was given.
 */
import { Registry } from 'prom-client';
import { createStreamsOnDemand } from '../../../streams/on-demand.js';
import { quietLogger, until } from './helpers.js';

const tick = {
  streams: {
    tick: { input: { generate: { interval: '20ms', count: 2, message: { n: 1 } } }, output: { stdout: {} } },
  },
};

test('no streaming config: nothing loaded; the first one starts its streams and their metrics', async () => {
  const lines: string[] = [];
  const registry = new Registry();
  const mgr = createStreamsOnDemand({ logger: quietLogger(), stdout: { write: (c: string) => lines.push(c) } });
  mgr.metrics(registry);
  try {
    await mgr.apply([{ api_id: 'plain', listenPath: '/plain/' }]);
    expect(mgr.list()).toEqual([]);
    expect((await registry.getMetricsAsJSON()).map((m) => m.name)).toEqual([]);

    await mgr.apply([
      { api_id: 'plain', listenPath: '/plain/' },
      { api_id: 'demo', listenPath: '/demo/', streaming: tick },
    ]);
    expect(mgr.list().map((s) => `${s.api_id}/${s.stream}`)).toEqual(['demo/tick']);
    await until(() => lines.length === 2, 3000, '2 lines');
    expect((await registry.getMetricsAsJSON()).some((m) => m.name.startsWith('gw_stream'))).toBe(true);

    await mgr.apply([{ api_id: 'plain', listenPath: '/plain/' }]);
    await until(() => mgr.list().length === 0, 3000, 'the stream stopped');
  } finally {
    await mgr.stop();
  }
});
