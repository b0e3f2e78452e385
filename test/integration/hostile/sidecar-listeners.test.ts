/**
 * Slow clients against a real `gw sidecar` process (docs/contract.md#hostile-input), on both of its listeners: the gateway
 * (--listen) and the ops listener (--metrics-listen: /healthz, /readyz, /metrics). headers_timeout and
 * the connection caps are shortened through its --config file. Each listener is held with 2× a cap of
 * slow connections while a normal client is still served; the slow heads are cut with 408; the process
 * never exits and answers no 5xx.
 */
import type { Server } from 'node:http';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { freshNamespace } from '../../helpers/kube.js';
import { configOf, eventually, startSidecar, status, writeConfigMap, type Sidecar } from '../../helpers/sidecar.js';
import { keptClient, slowHead, type SlowHead } from '../../helpers/slow-client.js';

const PER_CLIENT = 5;
const MAX_CONNECTIONS = 20;
const OPTIONS = `
headers_timeout: 1
max_connections: ${MAX_CONNECTIONS}
max_connections_per_client: ${PER_CLIENT}
`;

let echo: { server: Server; url: string };
let sc: Sidecar;
const codes: number[] = [];
/** GET over a fresh connection from `localAddress`; the status is recorded for the no-5xx check. */
async function get(url: string, localAddress: string): Promise<number> {
  const kept = await keptClient(url, localAddress);
  try {
    const head = await kept.ask(new URL(url).pathname);
    const code = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
    codes.push(code);
    return code;
  } finally {
    kept.close();
  }
}

const cutWithin = async (held: SlowHead[], ms: number): Promise<string[]> =>
  Promise.race([
    Promise.all(held.map((h) => h.closed)),
    new Promise<never>((_r, rej) => setTimeout(() => rej(new Error(`slow heads not cut within ${ms} ms`)), ms)),
  ]);

beforeAll(async () => {
  const ns = await freshNamespace('slow-sidecar');
  echo = await startEcho();
  await writeConfigMap(ns, configOf(ns, [{ name: 'app', path: '/', rate: 100_000, per: 1 }]));
  sc = await startSidecar({ ns, upstream: echo.url, options: OPTIONS });
}, 60_000);

afterAll(async () => {
  const exited = sc?.proc.exitCode;
  const code = await sc?.stop();
  echo?.server.close();
  expect(exited).toBeNull(); // alive through every test
  expect(code).toBe(0);
  expect(codes.filter((c) => c >= 500)).toEqual([]);
});

const listeners = [
  ['gateway', () => sc.gw, '/app/x'],
  ['ops', () => sc.ops, '/healthz'],
] as const;

describe.each(listeners)('the sidecar’s %s listener', (_name, base, path) => {
  test('a slow request head is cut after headers_timeout (1 s): 408, then closed', async () => {
    const t0 = Date.now();
    const [got] = await cutWithin([slowHead(base(), '127.0.0.1', 200, path)], 15_000);
    expect(got).toMatch(/^HTTP\/1\.1 408/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
  });

  test('2× the per-client cap of slow connections from one address: the rest closed at once, another client served', async () => {
    const held = Array.from({ length: 2 * PER_CLIENT }, () => slowHead(base(), '127.0.0.2', 200, path));
    await eventually(
      async () => held.filter((h) => h.socket.destroyed).length >= PER_CLIENT,
      5000,
      'connections past the per-client cap closed',
    );
    // a client of another address is served while the cap's own slow connections are held
    expect(held.filter((h) => !h.socket.destroyed).length).toBeGreaterThan(0);
    expect(await get(`${base()}${path}`, '127.0.0.3')).toBe(200);
    const got = await cutWithin(held, 15_000); // the held ones are cut by the head timeout
    expect(got.filter((g) => g.startsWith('HTTP/1.1 408')).length).toBeGreaterThanOrEqual(1);
  });

  test('2× max_connections of slow connections from many addresses: a client connected before is still served, new ones again after the cut', async () => {
    const keep = await keptClient(base(), '127.0.0.4');
    try {
      expect(await keep.ask(path)).toMatch(/^HTTP\/1\.1 200/);
      const held: SlowHead[] = [];
      const addresses = (2 * MAX_CONNECTIONS) / PER_CLIENT;
      for (let a = 0; a < addresses; a++)
        for (let i = 0; i < PER_CLIENT; i++) held.push(slowHead(base(), `127.0.1.${10 + a}`, 200, path));
      await eventually(
        async () => held.filter((h) => h.socket.destroyed).length >= MAX_CONNECTIONS - 1,
        5000,
        'connections past max_connections closed',
      );
      expect(await keep.ask(path)).toMatch(/^HTTP\/1\.1 200/);
      await cutWithin(held, 15_000);
      expect(await get(`${base()}${path}`, '127.0.0.5')).toBe(200);
    } finally {
      keep.close();
    }
  });
});

test('the options reached both listeners: a normal request on each still answers after the floods', async () => {
  expect(await status(`${sc.ops}/readyz`)).toBe(200);
  expect(await get(`${sc.gw}/app/after`, '127.0.0.6')).toBe(200);
});
