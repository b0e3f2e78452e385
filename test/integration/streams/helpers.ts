/** Loopback HTTP receivers and a minimal gateway that mounts a stream manager's tryHandle(). */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../../../lib/logger.js';
import type { StreamManager } from '../../../streams/manager.js';

export const quietLogger = () => createLogger('streams-test', process.env.GW_TEST_LOG_LEVEL ?? 'silent');

export interface Hit {
  /** performance.now() when the request reached the receiver */
  t: number;
  path: string;
  body: unknown;
  method: string;
  headers: IncomingMessage['headers'];
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export type ReplyFn = (hit: Hit, n: number) => Reply | Promise<Reply>;

export interface Receiver {
  url: string;
  port: number;
  /** Successful (2xx) hits, in arrival order. */
  hits: Hit[];
  /** Every request, whatever it was answered. */
  all: Hit[];
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function receiver(reply: ReplyFn = () => ({ status: 200 }), port = 0): Promise<Receiver> {
  const hits: Hit[] = [];
  const all: Hit[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const t = performance.now();
    void (async () => {
      const text = await readBody(req);
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // keep the text
      }
      const hit = { t, path: req.url ?? '', body, method: req.method ?? '', headers: req.headers };
      all.push(hit);
      const r = await reply(hit, all.length);
      if (r.status >= 200 && r.status < 300) hits.push(hit);
      const out = JSON.stringify(r.body ?? { ok: r.status < 300 });
      res.writeHead(r.status, { 'content-type': 'application/json', ...(r.headers ?? {}) });
      res.end(out);
    })();
  });
  const p = await listen(server, port);
  return {
    url: `http://127.0.0.1:${p}`,
    port: p,
    hits,
    all,
    async waitFor(n, timeoutMs = 15_000) {
      const end = Date.now() + timeoutMs;
      while (hits.length < n) {
        if (Date.now() > end) throw new Error(`receiver got ${hits.length} of ${n} messages`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

export interface Gateway {
  url: string;
  post(path: string, body: unknown): Promise<{ status: number; retryAfter: string | null; json: unknown }>;
  close(): Promise<void>;
}

/** Routes POST {listenPath}{rest} to manager.tryHandle(apiId, '/' + rest); anything else → 404. */
export async function gateway(mgr: StreamManager, apiId: string, listenPath: string): Promise<Gateway> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const lp = listenPath.replace(/\/$/, '');
    if ((path === lp || path.startsWith(`${lp}/`)) && mgr.tryHandle(apiId, path.slice(lp.length) || '/', req, res))
      return;
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":"not a stream"}');
  });
  const port = await listen(server, 0);
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    async post(path, body) {
      const r = await fetch(url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: r.status, retryAfter: r.headers.get('retry-after'), json: await r.json() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Largest number of timestamps inside any window [t, t + windowMs). */
export function maxInWindow(ts: number[], windowMs: number): number {
  const s = [...ts].sort((a, b) => a - b);
  let best = 0;
  let j = 0;
  for (let i = 0; i < s.length; i++) {
    while (s[i]! - s[j]! >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
