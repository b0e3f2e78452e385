/**
 * HTTP/1.1 pipelining through a real `gw standalone` (lib/http/pipelined.ts): requests a client pipelines
 * on one connection are answered in order, one upstream call at a time, as nginx serves them; a client
 * pipelining more than PIPELINED_MAX behind an answer that does not come has its connection closed, and it
 * never held more than one upstream call. Before, node handed every pipelined request over at once and
 * each began its upstream call: 5,000 in one write held 5,000 upstream connections.
 */
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PIPELINED_MAX } from '../../../lib/tuning.js';
import { apiManifest, cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

let upstream: Server;
let gw: Standalone;
let dir: string;
/** upstream calls in flight now, the most at once, and the paths in the order they arrived */
let inFlight = 0;
let most = 0;
const seen: string[] = [];
const held: Array<() => void> = [];

beforeAll(async () => {
  upstream = createServer((req, res) => {
    inFlight++;
    most = Math.max(most, inFlight);
    seen.push(req.url ?? '');
    const done = (): void => {
      inFlight--;
      res.end(req.url);
    };
    // /hold/… is answered only when the test lets it go; the others after 20 ms
    if (req.url?.startsWith('/hold')) held.push(done);
    else setTimeout(done, 20);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  dir = tempDir('gw-pipelining-');
  const url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  writeFileSync(
    join(dir, 'api.yaml'),
    apiManifest('open', `use_keyless: true\nproxy: {listen_path: /, target_url: '${url}'}`),
  );
  gw = await startStandalone(dir);
});

afterAll(async () => {
  for (const h of held.splice(0)) h();
  await gw?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  if (dir) cleanup(dir);
});

/** `n` GETs of `path(i)` in one write on a new connection; resolves with what came back when it closes or `until` is read. */
function pipeline(
  n: number,
  path: (i: number) => string,
  until?: (got: string) => boolean,
): Promise<{ got: string; closed: boolean; socket: Socket }> {
  const u = new URL(gw.gateway);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => {
      let out = '';
      for (let i = 0; i < n; i++) out += `GET ${path(i)} HTTP/1.1\r\nHost: x\r\n\r\n`;
      s.write(out);
    });
    let got = '';
    const timer = setTimeout(() => reject(new Error(`no end within 10 s; got ${got.length} bytes`)), 10_000);
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (until?.(got)) {
        clearTimeout(timer);
        resolve({ got, closed: false, socket: s });
      }
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ got, closed: true, socket: s });
    });
    s.on('error', () => undefined); // a reset after the close: the close says it
  });
}

test('pipelined requests are answered in order, one upstream call at a time', async () => {
  most = 0;
  seen.length = 0;
  const n = 10;
  const { got, socket } = await pipeline(
    n,
    (i) => `/p/${i}`,
    (g) => (g.match(/HTTP\/1\.1 200/g) ?? []).length === n && g.endsWith(`/p/${n - 1}`),
  );
  socket.destroy();
  const bodies = [...got.matchAll(/\r\n\r\n(\/p\/\d+)/g)].map((m) => m[1]);
  expect(bodies).toEqual(Array.from({ length: n }, (_, i) => `/p/${i}`));
  expect(seen).toEqual(bodies);
  expect(most).toBe(1);
});

test(`past ${PIPELINED_MAX} waiting behind an answer that does not come, the connection is closed; it held one upstream call`, async () => {
  most = 0;
  seen.length = 0;
  const r = await pipeline(500, (i) => `/hold/${i}`);
  expect(r.closed).toBe(true);
  // the first one's call began (or was cancelled with the connection before it reached the upstream): no other
  await new Promise((res) => setTimeout(res, 300));
  expect(seen.filter((p) => p !== '/hold/0')).toEqual([]);
  expect(most).toBeLessThanOrEqual(1);
  // another client is served meanwhile
  const other = await fetch(`${gw.gateway}/p/other`);
  expect([other.status, await other.text()]).toEqual([200, '/p/other']);
  for (const h of held.splice(0)) h();
  await new Promise((res) => setTimeout(res, 100));
});

test(`${PIPELINED_MAX} waiting are kept, and answered once the one ahead is`, async () => {
  most = 0;
  seen.length = 0;
  const n = PIPELINED_MAX + 1; // the one answered, and PIPELINED_MAX behind it
  const answered = pipeline(
    n,
    (i) => (i === 0 ? '/hold/first' : `/p/${i}`),
    (g) => (g.match(/HTTP\/1\.1 200/g) ?? []).length === n && g.endsWith(`/p/${n - 1}`),
  );
  const deadline = Date.now() + 5000;
  while (held.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(seen).toEqual(['/hold/first']);
  held.shift()!();
  const { got, socket } = await answered;
  socket.destroy();
  expect((got.match(/HTTP\/1\.1 200/g) ?? []).length).toBe(n);
  expect(most).toBe(1);
});
