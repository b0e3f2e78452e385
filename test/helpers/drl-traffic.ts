/**
 * Traffic shapes for the DRL tests and the shapes measurement (test/bench/drl-shapes.ts): an upstream
 * that records when it receives each request (per first path segment), open-loop generators at a fixed
 * rate over a fixed number of keep-alive connections, and the bounds of docs/contract.md#drl-bounds computed on the
 * upstream's own receive times.
 */
import { createServer, type Server } from 'node:http';
import { Pool } from 'undici';

export interface Recorder {
  url: string;
  /** Receive times (ms, Date.now()) of the requests whose path starts with `/<segment>/`. */
  times(segment: string): number[];
  /** Receive times of every request. */
  all(): number[];
  close(): Promise<void>;
}

export async function startRecorder(): Promise<Recorder> {
  const seen = new Map<string, number[]>();
  const server: Server = createServer((req, res) => {
    const at = Date.now();
    const seg = (req.url ?? '/').split('/')[1] ?? '';
    let list = seen.get(seg);
    if (!list) seen.set(seg, (list = []));
    list.push(at);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    times: (segment) => [...(seen.get(segment) ?? [])].sort((a, b) => a - b),
    all: () => [...seen.values()].flat().sort((a, b) => a - b),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface Drive {
  origin: string;
  path: string;
  /** Requests per second (open loop: a late request is sent at once, so the count over the run holds). */
  rate: number;
  /** Start after this many ms, run this many ms. */
  startMs?: number;
  ms: number;
  /** Keep-alive connections (1 = one client on one connection). */
  connections?: number;
  headers?: Record<string, string>;
}

export interface DriveResult {
  ok: number;
  refused: number;
  /** Errors and other statuses (a killed gateway). */
  other: number;
  /** Retry-After of the refusals (s). */
  retryAfter: number[];
  /** X-RateLimit-Remaining of the admissions. */
  remaining: number[];
  /** When each request was answered (ms, Date.now()): the demand the gateway actually saw, whatever the client's lag. */
  sent: number[];
}

/** Sends `rate` requests a second for `ms`; stops early when `stop()` says so. */
export async function drive(d: Drive, stop: () => boolean = () => false): Promise<DriveResult> {
  const conns = d.connections ?? 4;
  const pool = new Pool(d.origin, { connections: conns, pipelining: 1, keepAliveTimeout: 30_000 });
  const r: DriveResult = { ok: 0, refused: 0, other: 0, retryAfter: [], remaining: [], sent: [] };
  const inflight = new Set<Promise<void>>();
  const maxInflight = conns * 8;
  if (d.startMs) await sleep(d.startMs);
  const start = performance.now();
  try {
    for (let i = 0; ; i++) {
      const due = start + (i * 1000) / d.rate;
      if (due - start >= d.ms || stop()) break;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      while (inflight.size >= maxInflight) await Promise.race(inflight);
      const p: Promise<void> = pool
        .request({ path: d.path, method: 'GET', headers: d.headers })
        .then(async (res) => {
          r.sent.push(Date.now());
          await res.body.dump();
          if (res.statusCode === 200) {
            r.ok++;
            const rem = Number(res.headers['x-ratelimit-remaining']);
            if (Number.isFinite(rem)) r.remaining.push(rem);
          } else if (res.statusCode === 429) {
            r.refused++;
            r.retryAfter.push(Number(res.headers['retry-after']));
          } else r.other++;
        })
        .catch(() => {
          r.sent.push(Date.now());
          r.other++;
        })
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await Promise.all(inflight);
  } finally {
    await pool.close().catch(() => undefined);
  }
  return r;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The most entries of sorted `times` in any half-open span of `ms`. */
export function maxInAnySpan(times: number[], ms: number): number {
  let best = 0;
  let j = 0;
  for (let i = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= ms) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

/** Entries of `times` in [from, to). */
export const between = (times: number[], from: number, to: number): number =>
  times.filter((t) => t >= from && t < to).length;

/** Counts in consecutive windows of `perMs` from `t0`, `count` of them. */
export function windows(times: number[], t0: number, perMs: number, count: number): number[] {
  return Array.from({ length: count }, (_, k) => between(times, t0 + k * perMs, t0 + (k + 1) * perMs));
}

/** Merges several sorted lists of times into one sorted list. */
export const merged = (...lists: number[][]): number[] => lists.flat().sort((a, b) => a - b);
