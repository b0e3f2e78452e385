/**
 * Requests at a fixed rate (open loop) from a process of their own, so that the latencies measured are the
 * gateway's and not the test runner's: a client inside the jest worker waits for that worker's own
 * garbage collections and tasks. `steadyLoad()` starts the child; `stop()` returns each latency (ms) and
 * the count of answers other than 200. The child: `node steady-load.js ORIGIN PATH PER_SECOND`, stopped
 * by an IPC message.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

/** The 99th percentile of latencies `xs` (ms; any order), NaN when there are none. */
export const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? NaN;

export interface LoadResult {
  latencies: number[];
  failed: number;
}

/** Starts the load in a child process; resolves once its first request has been sent. */
export async function steadyLoad(
  origin: string,
  path: string,
  perSecond: number,
): Promise<{ stop: () => Promise<LoadResult> }> {
  const child = fork(fileURLToPath(import.meta.url), [origin, path, String(perSecond)], { stdio: 'inherit' });
  const result = new Promise<LoadResult>((resolve, reject) => {
    child.on('message', (m: { started?: boolean } | LoadResult) => {
      if ('latencies' in m) resolve(m);
    });
    child.once('exit', (code) => reject(new Error(`load process exited ${code} before reporting`)));
  });
  result.catch(() => undefined); // observed by stop()
  await new Promise<void>((resolve, reject) => {
    child.on('message', (m: { started?: boolean }) => m.started && resolve());
    child.once('exit', (code) => reject(new Error(`load process exited ${code}`)));
  });
  return {
    stop: () => {
      child.send('stop');
      return result;
    },
  };
}

async function run(origin: string, path: string, perSecond: number): Promise<void> {
  const pool = new Pool(origin, { connections: 32 });
  const latencies: number[] = [];
  let failed = 0;
  const inflight = new Set<Promise<void>>();
  const every = 1000 / perSecond;
  const started = performance.now();
  let sent = 0;
  const timer = setInterval(() => {
    // catch up on the schedule: a late timer sends what it owes, so a stalled gateway shows as latency
    const due = Math.floor((performance.now() - started) / every);
    for (; sent < due; sent++) {
      const t0 = performance.now();
      const p = pool
        .request({ method: 'GET', path })
        .then(async (r) => {
          await r.body.dump();
          if (r.statusCode !== 200) failed++;
        })
        .catch(() => void failed++)
        .finally(() => {
          latencies.push(performance.now() - t0);
          inflight.delete(p);
        });
      inflight.add(p);
    }
  }, 5);
  process.send!({ started: true });
  await new Promise<void>((resolve) => process.once('message', () => resolve()));
  clearInterval(timer);
  await Promise.all([...inflight]);
  await pool.close();
  process.send!({ latencies, failed } satisfies LoadResult, () => process.exit(0));
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  const [origin, path, rate] = process.argv.slice(2);
  void run(origin!, path!, Number(rate));
}
