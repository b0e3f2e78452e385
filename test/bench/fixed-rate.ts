/**
 * A fixed-rate HTTP client for `make bench` (wrk2 is not in Debian): sends `rate` requests per second
 * for `ms` milliseconds over keep-alive connections, open loop (a slow answer does not delay the next
 * request), and prints latency percentiles in ms as JSON.   fixed-rate.js ORIGIN PATH RATE MS [AUTH]
 */
import { Pool } from 'undici';

const [origin, path, rateArg, msArg, auth] = process.argv.slice(2);
const rate = Number(rateArg);
const ms = Number(msArg);
const headers: Record<string, string> = auth ? { authorization: auth } : {};
const pool = new Pool(origin!, { connections: 64, pipelining: 1 });

async function phase(durationMs: number, record: boolean): Promise<{ lat: number[]; errors: number }> {
  const total = Math.floor((rate * durationMs) / 1000);
  const lat: number[] = [];
  let errors = 0;
  let sent = 0;
  let finished = 0;
  const t0 = performance.now();
  await new Promise<void>((done) => {
    const one = (): void => {
      const start = performance.now();
      pool
        .request({ path: path!, method: 'GET', headers })
        .then(async (r) => {
          await r.body.dump();
          if (r.statusCode >= 300) errors++;
          if (record) lat.push(performance.now() - start);
        })
        .catch(() => errors++)
        .finally(() => {
          if (++finished === total) done();
        });
    };
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) * rate) / 1000));
      while (sent < due) {
        sent++;
        one();
      }
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
  return { lat: lat.sort((a, b) => a - b), errors };
}

const q = (xs: number[], p: number): number => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? NaN;

await phase(1000, false); // warm-up
const r = await phase(ms, true);
await pool.close();
process.stdout.write(JSON.stringify({ rate, n: r.lat.length, errors: r.errors, p50: q(r.lat, 0.5), p90: q(r.lat, 0.9), p99: q(r.lat, 0.99), max: r.lat.at(-1) }) + '\n');
