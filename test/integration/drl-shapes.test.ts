/**
 * docs/contract.md#drl-bounds's promise of the DRL, through three real `gw standalone --redis` processes sharing one
 * Redis, every traffic shape of docs/limiter-engine.md "Figures" at once (90 per 3 s where the bench runs 120 per 2 s: leases live
 * 3 slots of per / 40, a longer window gives them time, and a lower rate keeps the load generator on time,
 * on a loaded machine) (one API each, so one bucket each), admissions counted
 * by the upstream's own receive times (an upstream in a process of its own, recorder-process.ts: in the jest
 * worker, beside every load generator, its stamps came up to 1.5 s late on a loaded machine):
 *   upper bound: over any span of 3 × per from the first request, ≤ 1.1 × 3 × rate (+1 per gateway when
 *   rate < N); lower bound: ≥ 0.9 × rate in each window of per (from the first request) once
 *   2 × drl_notification_frequency has passed, while demand ≥ rate.
 * Shapes: even over 3 at 2×; 70/20/10 at 2×; all on one gateway through one keep-alive connection at
 * 1.5×; hot pod 90/5/5 at 1.2×; 30 per 1 s on 2 gateways (first second); rate < number of gateways
 * (2 per 3 s at 3/s each, and 2 per 1 s at 2/s each: every gateway asks in step, each request per / 2
 * after the last); one client paced at a rate below N (2 per 1 s, a request every 500 ms on one
 * connection to one gateway: its tokens come back exactly per later); the same at a rate at or above N
 * under 10 (4 per 1 s), and 6 per 1 s on 3 gateways asked in step at 1×, 2× and 8×, 5 per 1 s out of
 * step at 2×, 9 per 1 s in step, 3 per 1 s on 3 gateways at 1× (no token to spare: the exact window's span
 * window, docs/limiter-engine.md); a limit changed mid-run (the manifest rewritten; the new rate applies at
 * the next lease). GW_DRL_REPORT=1 prints each small shape's largest span of 3 × per and its windows.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { freshRedis, redisUrl } from '../helpers/redis.js';
import { startRecorderProcess, type ProcessRecorder } from '../helpers/recorder-process.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { drive, maxInAnySpan, merged, sleep, windows, type DriveResult } from '../helpers/drl-traffic.js';

const HEARTBEAT_S = 1;
const RUN_MS = 9500;

const api = (name: string, upstream: string, rate: number, per: number): string =>
  `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /${name}/, target_url: '${upstream}/${name}', strip_listen_path: true}\n  global_rate_limit: {rate: ${rate}, per: ${per}}\n`;

interface Bound {
  rate: number;
  per: number;
  gateways: number;
  /** Lower bound from this window index on (windows of per from the first request). */
  fromWindow: number;
  /** Windows checked for the lower bound. */
  windows: number;
  /** When the requests were sent: a window is held to the lower bound only when its demand reached the rate. */
  sent: number[];
  /** The lower bound on average over the windows (a small rate, where one request late by the machine's load moves a window). */
  average?: boolean;
}

/** The violations of the bounds of docs/contract.md#drl-bounds in `times` (empty = kept). */
export function violations(name: string, times: number[], b: Bound): string[] {
  const out: string[] = [];
  const perMs = b.per * 1000;
  const few = b.rate < b.gateways;
  const cap = Math.floor(1.1 * 3 * b.rate) + (few ? b.gateways : 0);
  const max3 = maxInAnySpan(times, 3 * perMs);
  if (max3 > cap) out.push(`${name}: ${max3} admitted in a span of 3 × per (bound ${cap})`);
  if (times.length === 0) return [`${name}: nothing admitted`];
  const w = windows(times, times[0]!, perMs, b.fromWindow + b.windows);
  const offered = windows(b.sent, times[0]!, perMs, b.fromWindow + b.windows);
  // a loaded machine may send less than asked, or late and in bursts: the bound holds while demand stays ≥ rate,
  // so a window is held to it when each of its slices was offered its share of the rate (slices of at least 2
  // requests of the rate, at most 8 a window)
  const k = Math.max(1, Math.min(8, Math.floor(b.rate / 2)));
  const slices = windows(b.sent, times[0]!, perMs / k, k * (b.fromWindow + b.windows));
  const steady = (w: number): boolean => slices.slice(k * w, k * w + k).every((n) => n >= b.rate / k);
  const checked = w.filter((_, k) => k >= b.fromWindow && steady(k));
  // a machine too loaded to offer a steady demand ≥ rate tests the upper bound only (said in the output)
  if (checked.length < Math.min(1, b.windows))
    console.warn(`${name}: demand never stayed at the rate for a whole window (${offered}): lower bound not checked`);
  if (few || b.average) {
    // whole tokens: within one request of 0.9 × rate per per on average
    const need = 0.9 * b.rate * checked.length - 1;
    const got = checked.reduce((a, c) => a + c, 0);
    if (got < need) out.push(`${name}: ${got} admitted in ${checked.length} windows (lower bound ${need}): ${w}`);
  } else if (checked.some((n) => n < 0.9 * b.rate))
    out.push(`${name}: a window under 0.9 × ${b.rate} after convergence: ${w.join(', ')} (offered ${offered})`);
  return out;
}

describe('DRL: docs/contract.md#drl-bounds bounds through three gw standalone processes on one Redis', () => {
  let redis: Redis;
  let up: ProcessRecorder;
  let dir: string;
  let cfgDir: string;
  let gws: Standalone[] = [];

  beforeAll(async () => {
    redis = await freshRedis();
    up = await startRecorderProcess();
    dir = tempDir();
    cfgDir = tempDir('gw-drl-cfg-');
    const shapes: [string, number, number][] = [
      ['even', 90, 3],
      ['skew', 90, 3],
      ['one', 90, 3],
      ['hot', 90, 3],
      ['fast', 30, 1],
      ['few', 2, 3],
      ['step', 2, 1],
      ['paced', 2, 1],
      ['small', 4, 1],
      ['smallstep', 6, 1],
      ['step1', 6, 1],
      ['step8', 6, 1],
      ['phase', 5, 1],
      ['nine', 9, 1],
      ['three', 3, 1],
      ['change', 60, 1],
    ];
    for (const [name, rate, per] of shapes) writeFileSync(join(dir, `${name}.yaml`), api(name, up.url, rate, per));
    const cfg = join(cfgDir, 'gw.yaml');
    writeFileSync(cfg, `drl_threshold: 0\ndrl_notification_frequency: ${HEARTBEAT_S}\nkv_deadline_ms: 3000\n`);
    writeFileSync(join(dir, 'warm.yaml'), api('warm', up.url, 1_000_000, 1));
    gws = await Promise.all(
      [0, 1, 2].map(() =>
        startStandalone(dir, ['--redis', redisUrl(), '--config', cfg], {}, { readyTimeoutMs: 45_000 }),
      ),
    );
    // warm each gateway up (JIT, connections) before the measured run
    await Promise.all(
      gws.map((g) => drive({ origin: g.gateway, path: '/warm/x', rate: 100, ms: 1500, connections: 2 })),
    );
  }, 90_000);

  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await up?.close();
    redis?.disconnect();
    if (dir) cleanup(dir);
    if (cfgDir) cleanup(cfgDir);
  });

  test('every shape at once: the upper bound from the first request, the lower bound after 2 heartbeats', async () => {
    const [a, b, c] = gws.map((g) => g.gateway) as [string, string, string];
    const change = (async () => {
      await sleep(2500);
      writeFileSync(join(dir, 'change.yaml'), api('change', up.url, 40, 1));
    })();
    // [shape, gateway, requests per second, connections, start after (ms)]
    const plan: [string, string, number, number, number?][] = [
      // even over 3 gateways, 2× demand (90 per 3 s = 30/s)
      ['even', a, 20, 2],
      ['even', b, 20, 2],
      ['even', c, 20, 2],
      // 70/20/10, 2×
      ['skew', a, 42, 2],
      ['skew', b, 12, 2],
      ['skew', c, 6, 2],
      // one client on one keep-alive connection to one gateway of three, 1.5×
      ['one', a, 45, 1],
      // a hot pod: 90/5/5 at 1.2×
      ['hot', b, 32.4, 2],
      ['hot', a, 1.8, 1],
      ['hot', c, 1.8, 1],
      // 30 per 1 s on 2 gateways, 2×
      ['fast', a, 30, 2],
      ['fast', b, 30, 2],
      // rate 2 per 3 s below the 3 gateways
      ['few', a, 3, 1],
      ['few', b, 3, 1],
      ['few', c, 3, 1],
      // rate 2 per 1 s on 3 gateways, each 2 requests a second, all three at once
      ['step', a, 2, 1],
      ['step', b, 2, 1],
      ['step', c, 2, 1],
      // one client paced at the rate, 2 per 1 s
      ['paced', b, 2, 1],
      // a rate at or above N with no token to spare in a slot window: one client paced at 4 per 1 s, and
      // 6 per 1 s on 3 gateways, each 4 requests a second at the same instants (2×)
      ['small', c, 4, 1],
      ['smallstep', a, 4, 1],
      ['smallstep', b, 4, 1],
      ['smallstep', c, 4, 1],
      // small rates at 1× and 8× in step, out of step, 9 per 1 s, and 3 per 1 s (no token to spare at N = 3)
      ['step1', a, 2, 1],
      ['step1', b, 2, 1],
      ['step1', c, 2, 1],
      ['step8', a, 16, 2],
      ['step8', b, 16, 2],
      ['step8', c, 16, 2],
      ['phase', a, 4, 1],
      ['phase', b, 3, 1, 110],
      ['phase', c, 3, 1, 220],
      ['nine', a, 6, 1],
      ['nine', b, 6, 1],
      ['nine', c, 6, 1],
      ['three', a, 1, 1],
      ['three', b, 1, 1],
      ['three', c, 1, 1],
      // 60 → 40 per 1 s at 2.5 s; 75/s over two gateways
      ['change', b, 37.5, 2],
      ['change', c, 37.5, 2],
    ];
    const results: DriveResult[] = await Promise.all(
      plan.map(([shape, origin, rate, connections, startMs]) =>
        drive({ origin, path: `/${shape}/x`, rate, ms: RUN_MS - (startMs ?? 0), connections, startMs }),
      ),
    );
    await change;
    await up.sync();
    const sent = (shape: string): number[] =>
      merged(...results.filter((_, i) => plan[i]![0] === shape).map((r) => r.sent));
    const bad: string[] = [];
    const from = (per: number): number => Math.ceil((2 * HEARTBEAT_S) / per); // first window after convergence
    for (const [name, rate, per, gateways] of [
      ['even', 90, 3, 3],
      ['skew', 90, 3, 3],
      ['one', 90, 3, 3],
      ['hot', 90, 3, 3],
      ['few', 2, 3, 3],
      ['step', 2, 1, 3],
      ['paced', 2, 1, 3],
      ['small', 4, 1, 3],
      ['smallstep', 6, 1, 3],
      ['step1', 6, 1, 3],
      ['step8', 6, 1, 3],
      ['phase', 5, 1, 3],
      ['nine', 9, 1, 3],
      ['three', 3, 1, 3],
    ] as const) {
      const perMs = per * 1000;
      // a rate under 10 per window is held to its average over the whole run: with a few per window one
      // request's upstream delay (the first one opens the connection) moves it across a window's edge
      const average = rate < 10;
      const fromWindow = average ? 0 : from(per);
      const count = Math.floor((RUN_MS - 300) / perMs) - fromWindow;
      if (process.env.GW_DRL_REPORT)
        console.log(
          `REPORT ${name} max3 ${maxInAnySpan(up.times(name), 3 * perMs)} w ${windows(up.times(name), up.times(name)[0] ?? 0, perMs, 9).join(',')}`,
        );
      bad.push(
        ...violations(name, up.times(name), {
          rate,
          per,
          gateways,
          fromWindow,
          windows: count,
          sent: sent(name),
          average,
        }),
      );
    }
    // 30 per 1 s on 2 gateways: the upper bound, and the first second holds the limit, not a full bucket per
    // gateway (was 58). Its lower bound is the unit simulation's (test/unit/engine/drl.test.ts): leases live
    // 50–75 ms at per = 1 s, less than this machine's event-loop stalls under load
    const fast = up.times('fast');
    bad.push(...violations('fast', fast, { rate: 30, per: 1, gateways: 2, fromWindow: 2, windows: 0, sent: [] }));
    const firstSecond = windows(fast, fast[0]!, 1000, 1)[0]!;
    // one window measured at the upstream may hold a grant per gateway that the store counted in the next slot
    if (firstSecond > 33 + 2) bad.push(`fast: ${firstSecond} admitted in the first second`);
    // the changed limit: 60 per 1 s before the change; 40 per 1 s from when the old grants have left the window
    // (the directory watch takes up to 1 s, the grants of 60 stay counted 1.05 s more)
    const ch = up.times('change');
    const t0 = ch[0]!;
    const before = { rate: 60, per: 1, gateways: 2, fromWindow: 0, windows: 0, sent: sent('change') };
    bad.push(
      ...violations(
        'change (before)',
        ch.filter((t) => t < t0 + 2500),
        before,
      ),
    );
    const after = ch.filter((t) => t >= t0 + 5000);
    if (process.env.GW_DRL_REPORT)
      console.log(`REPORT change (after) w ${windows(after, after[0] ?? 0, 1000, 3).join(',')}`);
    bad.push(
      ...violations('change (after)', after, {
        rate: 40,
        per: 1,
        gateways: 2,
        fromWindow: 1,
        windows: 2,
        sent: sent('change'),
      }),
    );
    if (bad.length)
      console.log(
        results.map((r, i) => `${plan[i]![0]} ${r.ok}/${r.refused}/${r.other}`).join('; '),
        gws
          .map((g) =>
            g
              .output()
              .split('\n')
              .filter((l) => /DRL|store/.test(l))
              .slice(0, 5)
              .join('\n'),
          )
          .join('\n'),
      );
    expect(bad).toEqual([]);
    // every request was answered 200 or 429; refusals say when the group's allowance frees a request
    for (const r of results) {
      expect(r.other).toBe(0);
      for (const s of r.retryAfter) expect(s >= 1 && s <= 4).toBe(true);
    }
    // the headers describe the group's allowance: never above the limit
    for (const r of results.slice(0, 3)) for (const rem of r.remaining) expect(rem).toBeLessThanOrEqual(90);
  }, 60_000);
});
