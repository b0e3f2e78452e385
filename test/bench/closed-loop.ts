/** The scale benches' load: a closed loop of 16 connections, each sending its next request when the last is answered. */
import { Pool } from 'undici';

/** GET requests to `origin` for `ms`, the i-th with `requestOf(i)`; the number answered 200 (any other status throws). */
export async function closedLoop(
  origin: string,
  requestOf: (i: number) => { path: string; headers?: Record<string, string> },
  ms: number,
): Promise<number> {
  const pool = new Pool(origin, { connections: 16 });
  const end = performance.now() + ms;
  let done = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: 16 }, async (_, w) => {
      for (let i = w; performance.now() < end; i += 16) {
        const r = await pool.request({ method: 'GET', ...requestOf(i) });
        await r.body.dump();
        if (r.statusCode === 200) done++;
        else failed++;
      }
    }),
  );
  await pool.close();
  if (failed) throw new Error(`closed loop: ${failed} requests failed`);
  return done;
}
