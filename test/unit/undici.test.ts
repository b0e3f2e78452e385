/**
 * lib/http/undici.ts: undici through its public entry point; `request` with an explicit dispatcher behaves
 * like undici.request, `dispatchRequest` sends the path exactly as given.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as full from 'undici';
import { Agent, Pool, dispatchRequest, errors, request } from '../../lib/http/undici.js';

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

test('dispatchRequest sends origin and path as given: no URL normalisation of dot segments', async () => {
  const agent = new Agent();
  try {
    const r = await dispatchRequest(agent, { origin, path: '/a/%2E%2E/b/../c', method: 'GET' });
    expect(await r.body.json()).toMatchObject({ url: '/a/%2E%2E/b/../c' });
  } finally {
    await agent.close();
  }
});
