/** The stream manager resolves rate-limit resources: defaults (1000 per 1 s), reloads, removal. */
import { pino } from 'pino';
import { createStreamManager } from '../../../streams/manager.js';

const logger = pino({ level: 'silent' });
const api = (streaming: unknown) => [{ api_id: 'a', listenPath: '/a/', streaming }];
const drop = { input: { http_server: {} }, output: { drop: {} } };

describe('stream manager: rate-limit resources', () => {
  test('a resource without count/interval (or with an empty local) runs as 1000 per 1 s', async () => {
    const mgr = createStreamManager({ logger });
    try {
      await mgr.apply(
        api({
          rate_limit_resources: [
            { label: 'bare' },
            { label: 'empty', local: {} },
            { label: 'count-only', local: { count: 5 } },
          ],
          streams: { s: drop },
        }),
      );
      const byLabel = Object.fromEntries(mgr.limits().map((l) => [l.label, [l.count, l.intervalMs]]));
      expect(byLabel).toEqual({ bare: [1000, 1000], empty: [1000, 1000], 'count-only': [5, 1000] });
    } finally {
      await mgr.stop();
    }
  });

  test('a resource without a label runs as the resource labelled "" (named by rate_limit "")', async () => {
    const mgr = createStreamManager({ logger });
    try {
      const out = {
        input: { http_server: {} },
        output: { http_client: { url: 'http://127.0.0.1:1/x', rate_limit: '' } },
      };
      await mgr.apply(api({ rate_limit_resources: [{ local: { count: 2 } }], streams: { s: out } }));
      expect(mgr.limits().map((l) => [l.label, l.count, l.intervalMs])).toEqual([['', 2, 1000]]);
      expect(mgr.list().map((s) => s.stream)).toEqual(['s']);
    } finally {
      await mgr.stop();
    }
  });

  test('durations resolve (200ms, 1m); a reload changes the limit in place; a bad config keeps the old one', async () => {
    const mgr = createStreamManager({ logger });
    try {
      await mgr.apply(
        api({
          rate_limit_resources: [
            { label: 'x', local: { count: 3, interval: '200ms' } },
            { label: 'y', local: { interval: '1m' } },
          ],
          streams: { s: drop },
        }),
      );
      expect(mgr.limits().map((l) => [l.label, l.count, l.intervalMs])).toEqual([
        ['x', 3, 200],
        ['y', 1000, 60_000],
      ]);
      await mgr.apply(
        api({ rate_limit_resources: [{ label: 'x', local: { count: 7, interval: '2s' } }], streams: { s: drop } }),
      );
      expect(mgr.limits().map((l) => [l.label, l.count, l.intervalMs])).toEqual([['x', 7, 2000]]);
      await mgr.apply(api({ rate_limit_resources: [{ label: 'x', local: { count: -1 } }], streams: { s: drop } }));
      expect(mgr.limits().map((l) => [l.label, l.count, l.intervalMs])).toEqual([['x', 7, 2000]]);
      await mgr.apply(api(undefined));
      expect(mgr.limits()).toEqual([]);
    } finally {
      await mgr.stop();
    }
  });
});
