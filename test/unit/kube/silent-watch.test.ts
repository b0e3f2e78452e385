/**
 * A watch on a connection that went silent (no FIN: a partition, a lost NAT entry) over real HTTP: it
 * ends after the idle time like a watch the server ends, without an error (so the informer watches again
 * from its resourceVersion, no relist), and its connection is closed rather than reused.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createKubeApi } from '../../../lib/kube/api.js';
import { KUBE_AGENT_OPTIONS } from '../../../lib/kube/connection.js';
import { Agent } from '../../../lib/http/undici.js';

describe('a silent watch', () => {
  let server: Server;
  const sockets: Socket[] = [];
  let base: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url?.includes('watch=true')) {
        // one event, then silence with the connection kept open
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '2' } } })}\n`);
        return;
      }
      res.end(JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }));
    });
    server.on('connection', (s: Socket) => sockets.push(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  test('ends after the idle time without an error (it threw after 5 min: a relist), and its connection is closed', async () => {
    const dispatcher = new Agent(KUBE_AGENT_OPTIONS);
    const api = createKubeApi({ server: base, headers: async () => ({}), dispatcher }, 2_000, 300);
    const events: unknown[] = [];
    const t = Date.now();
    await api.watch(
      '/api/v1/configmaps',
      { resourceVersion: '1' },
      (e) => events.push(e),
      new AbortController().signal,
    );
    expect(Date.now() - t).toBeGreaterThanOrEqual(250);
    expect(events).toHaveLength(1);
    // the silent connection is closed by the client (never reused), and the API is still usable
    const watchSocket = sockets.at(-1)!;
    for (let i = 0; i < 50 && !watchSocket.destroyed; i++) await new Promise((r) => setTimeout(r, 10));
    expect(watchSocket.destroyed).toBe(true);
    expect(await api.get('/api/v1/configmaps')).toEqual({ metadata: { resourceVersion: '1' }, items: [] });
    await dispatcher.close();
  });
});
