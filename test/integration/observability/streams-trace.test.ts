/**
 * W3C trace context on the streams' calls (docs/contract.md#observability): http_client processors and outputs continue the
 * trace an http_server message came with (a new parent id per call), or start one per message.
 */
import { createStreamManager } from '../../../streams/manager.js';
import { quietLogger, receiver, type Receiver } from '../streams/helpers.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const TP = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;

test('http_server → http_client processor → http_client output: both calls carry the trace', async () => {
  const enrich: Receiver = await receiver(() => ({ status: 200, body: { enriched: true } }));
  const sink: Receiver = await receiver();
  const mgr = createStreamManager({ logger: quietLogger() });
  await mgr.apply([
    {
      api_id: 'ev',
      listenPath: '/ev/',
      streaming: {
        streams: {
          s: {
            input: { http_server: { path: '/in' } },
            pipeline: { processors: [{ http_client: { url: `${enrich.url}/enrich` } }] },
            output: { http_client: { url: `${sink.url}/hook` } },
          },
        },
      },
    },
  ]);
  const server = createServer((req, res) => {
    if (!mgr.tryHandle('ev', '/in', req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ev/in`;
  try {
    const post = (headers: Record<string, string>) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{"n":1}' });
    expect((await post({ traceparent: `00-${TRACE}-${PARENT}-01` })).status).toBe(202);
    await sink.waitFor(1);
    expect((await post({})).status).toBe(202);
    await sink.waitFor(2);
    const calls = [enrich.hits[0]!, sink.hits[0]!].map((h) => TP.exec(String(h.headers.traceparent)));
    for (const m of calls) {
      expect(m?.[1]).toBe(TRACE);
      expect(m?.[2]).not.toBe(PARENT);
    }
    expect(calls[0]![2]).not.toBe(calls[1]![2]);
    const fresh = [enrich.hits[1]!, sink.hits[1]!].map((h) => TP.exec(String(h.headers.traceparent)));
    expect(fresh[0]?.[1]).toMatch(/^[0-9a-f]{32}$/);
    expect(fresh[0]?.[1]).not.toBe(TRACE);
    expect(fresh[1]?.[1]).toBe(fresh[0]?.[1]); // one trace per message
  } finally {
    server.closeAllConnections();
    server.close();
    await mgr.stop();
    await enrich.close();
    await sink.close();
  }
});
