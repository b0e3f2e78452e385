/** Streams wired into the gateway: an http_server input under the listen path, delivered to a receiver. */
import { createServer, type Server } from 'node:http';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { cleanup, type Standalone } from '../helpers/standalone.js';
import { postEvent, startStreamIntake } from '../helpers/stream-intake.js';

describe('streams inside gw standalone', () => {
  let receiver: Server;
  let echo: { server: Server; url: string };
  const got: { at: number; body: string }[] = [];
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      let b = '';
      req.on('data', (c: Buffer) => (b += c.toString()));
      req.on('end', () => {
        got.push({ at: Date.now(), body: b });
        res.end('{}');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    echo = await startEcho();
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/in`;
    ({ gw, dir } = await startStreamIntake(
      echo.url,
      `  streaming:
    rate_limit_resources:
      - label: partner
        local: {count: 5, interval: 300ms}
    streams:
      intake:
        input: {http_server: {path: /in}}
        output: {http_client: {url: '${url}', rate_limit: partner}}
`,
    ));
  });
  afterAll(async () => {
    await gw?.stop();
    receiver?.close();
    echo?.server.close();
    cleanup(dir);
  });

  test('POSTs under the listen path are accepted (202) and delivered in order within the local limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) {
      statuses.push(await postEvent(gw, JSON.stringify({ n: i })));
    }
    expect(statuses.every((s) => s === 202)).toBe(true);
    const end = Date.now() + 5000;
    while (got.length < 15 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(got.map((g) => (JSON.parse(g.body) as { n: number }).n)).toEqual([...Array(15).keys()]);
    for (const g of got) expect(got.filter((h) => h.at >= g.at && h.at < g.at + 300).length).toBeLessThanOrEqual(5);
  });

  test('other paths of the API are still proxied', async () => {
    const r = await request(`${gw.gateway}/events/other`);
    expect(r.statusCode).toBe(200);
    expect((JSON.parse(await r.body.text()) as { path: string }).path).toBe('/other');
  });
});
