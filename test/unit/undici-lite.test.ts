/**
 * lib/http/undici.ts loads undici's dispatchers and APIs from their own files: the exports must be the
 * objects the package index exports, the calls must behave like undici.request,
 * and loading it (the gateway's whole module graph) must not load the index.
 */
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import * as full from 'undici';
import { Agent, Pool, errors, request } from '../../lib/http/undici.js';

let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/slow') return void setTimeout(() => res.end('late'), 2500);
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url, body, h: req.headers['x-test'] ?? null }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

test('each export is the object the undici index exports', () => {
  expect(Pool).toBe(full.Pool);
  expect(Agent).toBe(full.Agent);
  expect(errors).toBe(full.errors);
});

test('request(dispatcher, url, opts) sends method, path with query, headers and body', async () => {
  const agent = new Agent();
  try {
    const r = await request(agent, `${origin}/a/b?x=1&y=2`, {
      method: 'POST',
      headers: { 'x-test': 'yes' },
      body: 'payload',
    });
    expect(r.statusCode).toBe(200);
    expect(await r.body.json()).toEqual({ method: 'POST', url: '/a/b?x=1&y=2', body: 'payload', h: 'yes' });
    const g = await request(agent, new URL(`${origin}/plain`));
    expect(await g.body.json()).toMatchObject({ method: 'GET', url: '/plain' });
  } finally {
    await agent.close();
  }
});

test('a timeout rejects with the exported error class', async () => {
  const pool = new Pool(origin, { headersTimeout: 100 });
  try {
    await expect(request(pool, `${origin}/slow`)).rejects.toBeInstanceOf(errors.HeadersTimeoutError);
  } finally {
    await pool.close();
  }
});

test("the gateway's module graph (sidecar, standalone, the CLI's client commands) does not load the undici index", () => {
  // a fresh process: import the sidecar and standalone entry points, then list the undici files loaded
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(resolve('dist/cli/sidecar.js'))});
    await import(${JSON.stringify(resolve('dist/cli/standalone.js'))});
    await import(${JSON.stringify(resolve('dist/cli/client/index.js'))});
    const require = createRequire(import.meta.url);
    const loaded = Object.keys(require.cache).filter((f) => f.includes('/node_modules/undici/'));
    process.stdout.write(JSON.stringify(loaded));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  const loaded = JSON.parse(out) as string[];
  expect(loaded.some((f) => f.endsWith('/undici/lib/dispatcher/pool.js'))).toBe(true);
  expect(loaded.filter((f) => f.endsWith('/node_modules/undici/index.js'))).toEqual([]);
  expect(loaded.filter((f) => f.includes('/undici/lib/web/'))).toEqual([]);
});
