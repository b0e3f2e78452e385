/**
 * `make bench`: throughput and latency of the gateway as ratios against a baseline measured in the
 * same run (the echo upstream called directly), so machine noise cancels.
 *   - proxy overhead: keyless API with a limit high enough never to refuse
 *   - keyed API: auth + key limit + quota
 * Loopback only, bounded in time.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { cleanup, startStandalone, tempDir } from '../helpers/standalone.js';

const DURATION_MS = Number(process.env.GW_BENCH_MS ?? 3000);
const CONCURRENCY = Number(process.env.GW_BENCH_CONCURRENCY ?? 32);

interface Result {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

async function load(origin: string, path: string, headers: Record<string, string> = {}): Promise<Result> {
  const pool = new Pool(origin, { connections: CONCURRENCY });
  const lat: number[] = [];
  let non2xx = 0;
  const end = Date.now() + DURATION_MS;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        const r = await pool.request({ path, method: 'GET', headers });
        await r.body.dump();
        lat.push(performance.now() - t);
        if (r.statusCode >= 300) non2xx++;
      }
    }),
  );
  await pool.close();
  lat.sort((a, b) => a - b);
  return { rps: lat.length / (DURATION_MS / 1000), p50: lat[Math.floor(lat.length / 2)] ?? 0, p99: lat[Math.floor(lat.length * 0.99)] ?? 0, non2xx };
}

async function main(): Promise<void> {
  const echo = await startEcho();
  const dir = tempDir('gw-bench-');
  writeFileSync(
    join(dir, 'apis.yaml'),
    `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: open}
spec:
  use_keyless: true
  proxy: {listen_path: /open/, target_url: ${echo.url}}
  global_rate_limit: {rate: 100000000, per: 1}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: keyed}
spec:
  proxy: {listen_path: /keyed/, target_url: ${echo.url}}
---
apiVersion: v1
kind: Secret
metadata: {name: bench}
stringData: {key: bench-key-0123456789}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: bench}
spec: {secretRef: {name: bench, key: key}, rate: 100000000, per: 1, quota_max: -1}
`,
  );
  const gw = await startStandalone(dir);
  const gwOrigin = gw.gateway;
  try {
    await load(echo.url, '/warmup');
    const direct = await load(echo.url, '/x');
    const open = await load(gwOrigin, '/open/x');
    const keyed = await load(gwOrigin, '/keyed/x', { authorization: 'bench-key-0123456789' });
    const row = (name: string, r: Result): string =>
      `${name.padEnd(26)} ${r.rps.toFixed(0).padStart(8)} req/s  ratio ${(r.rps / direct.rps).toFixed(2)}  p50 ${r.p50.toFixed(2)} ms (x${(r.p50 / direct.p50).toFixed(2)})  p99 ${r.p99.toFixed(2)} ms  non-2xx ${r.non2xx}`;
    console.log(`gw bench: ${DURATION_MS} ms per run, ${CONCURRENCY} concurrent connections, loopback`);
    console.log(row('direct upstream (baseline)', direct));
    console.log(row('gateway keyless + API limit', open));
    console.log(row('gateway key + key limit', keyed));
  } finally {
    await gw.stop();
    echo.server.close();
    cleanup(dir);
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
