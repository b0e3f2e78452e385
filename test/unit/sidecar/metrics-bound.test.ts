/**
 * /metrics stays bounded however many APIs see traffic (sidecar/metrics.ts apiLabel): the first
 * MAX_API_SERIES APIs get their own `api` label value, later ones share `_other` and are counted.
 */
import { API_OTHER, GatewayMetrics, MAX_API_SERIES } from '../../../sidecar/metrics.js';

describe('per-API series bounded', () => {
  test('past MAX_API_SERIES APIs, one shared series; the scrape size stops growing', async () => {
    const m = new GatewayMetrics(false);
    const scrape = async (n: number, from: number): Promise<number> => {
      for (let i = from; i < n; i++) {
        const label = m.apiLabel(`api-${i}`);
        m.requests.labels({ api: label, code: '2xx' }).inc();
        m.upstream.labels({ api: label }).observe(0.002);
      }
      return Buffer.byteLength(await m.registry.metrics());
    };
    const atCap = await scrape(MAX_API_SERIES, 0);
    const past = await scrape(MAX_API_SERIES * 5, MAX_API_SERIES);
    expect(past - atCap).toBeLessThan(2_000); // the _other series only
    const text = await m.registry.metrics();
    const requestSeries = text.split('\n').filter((l) => l.startsWith('gw_requests_total{'));
    expect(requestSeries).toHaveLength(MAX_API_SERIES + 1);
    expect(text).toContain(`gw_requests_total{api="${API_OTHER}",code="2xx"} ${MAX_API_SERIES * 4}`);
    expect(text).toContain(`gw_metrics_apis_aggregated_total ${MAX_API_SERIES * 4}`);
    expect(m.apiLabel('api-0')).toBe('api-0'); // a labelled API keeps its label
    expect(m.apiLabel(`api-${MAX_API_SERIES * 9}`)).toBe(API_OTHER);
  });
});
