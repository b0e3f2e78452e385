/**
 * `make bench-drl`, part 1: the traffic shapes of docs/limiter-engine.md "Figures" measured on the DRL as built — real redis-server, real
 * `gw standalone --redis` processes (dist/cli/gw.js), admissions counted by the upstream's own receive
 * times (test/helpers/drl-traffic.ts), every shape at once (one API, so one bucket, each):
 *   three gateways A, B, C on one Redis database: even at 2× demand, 70/20/10 at 2×, one client on one
 *   keep-alive connection to one gateway at 1.5×, a hot pod 90/5/5 at 1.2× (each at 300 per 10 s and at
 *   120 per 2 s), rate < number of gateways (2 per 10 s);
 *   two gateways P, Q on another database (a group of two): 30 per 1 s at 2× (the first second);
 * then on A, B, C: a peer SIGKILLed mid-run (C) and a peer joining mid-run (D), at 300/10 and 120/2.
 * Printed per shape: admitted per window of `per` from the shape's first admission, the first window,
 * the lowest and mean window / rate after convergence (2 × drl_notification_frequency, and for the
 * peer shapes after the event), and the most admitted in any span of 3 × per / (3 × rate).
 * Gateway options: drl_threshold 0 (every limit on the DRL, the rate < gateways row included), the
 * rest at their defaults (drl_notification_frequency 2 s, kv_deadline_ms 1 s). Bounded: ~2.5 min.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startRedis } from '../harness/redis.js';
import { startStandalone, type Standalone } from '../helpers/standalone.js';
import { drive, maxInAnySpan, merged, sleep, startRecorder, windows, type Recorder } from '../helpers/drl-traffic.js';
import { apiYaml, bounded, scratch, conditions, fmt, stopAll, track } from './drl-bench-common.js';

const HEARTBEAT_S = 2;
const RUN_MS = Number(process.env.GW_BENCH_DRL_RUN_MS ?? 40_500);
/** When the peer events happen in the second run (ms from its start). */
const EVENT_MS = 12_000;

interface Shape {
  name: string;
  label: string;
  rate: number;
  per: number;
  gateways: number;
  /** [gateway index, requests per second, connections] */
  load: [number, number, number][];
}

/** 300 per 10 s and 120 per 2 s variants of a shape whose load is given as fractions of the rate at 1×. */
function both(name: string, label: string, gateways: number, shares: [number, number, number][]): Shape[] {
  return [
    [300, 10, ''],
    [120, 2, '2'],
  ].map(([rate, per, suffix]) => ({
    name: `${name}${suffix}`,
    label,
    rate: rate as number,
    per: per as number,
    gateways,
    load: shares.map(([g, x, c]) => [g, (x * (rate as number)) / (per as number), c] as [number, number, number]),
  }));
}

const SHAPES: Shape[] = [
  ...both('even', 'even over 3 gateways, 2×', 3, [
    [0, 2 / 3, 2],
    [1, 2 / 3, 2],
    [2, 2 / 3, 2],
  ]),
  ...both('skew', '70/20/10 over 3 gateways, 2×', 3, [
    [0, 1.4, 2],
    [1, 0.4, 2],
    [2, 0.2, 2],
  ]),
  ...both('one', 'one client, one keep-alive connection → one gateway of 3, 1.5×', 3, [[0, 1.5, 1]]),
  ...both('hot', 'hot pod 90/5/5, 1.2×', 3, [
    [1, 1.08, 2],
    [0, 0.06, 1],
    [2, 0.06, 1],
  ]),
  {
    name: 'few',
    label: 'rate < gateways: 2 per 10 s over 3, 1 req/s each',
    rate: 2,
    per: 10,
    gateways: 3,
    load: [
      [0, 1, 1],
      [1, 1, 1],
      [2, 1, 1],
    ],
  },
  {
    name: 'step',
    label: 'rate < gateways in step: 2 per 1 s over 3, 2 req/s each at the same instants',
    rate: 2,
    per: 1,
    gateways: 3,
    load: [
      [0, 2, 1],
      [1, 2, 1],
      [2, 2, 1],
    ],
  },
  // gateways 3 and 4 are P and Q, a group of two on its own database
  {
    name: 'fast',
    label: '30 per 1 s on 2 gateways, 2×',
    rate: 30,
    per: 1,
    gateways: 2,
    load: [
      [3, 30, 2],
      [4, 30, 2],
    ],
  },
];

const PEER_SHAPES: Shape[] = [
  // C (index 2) is SIGKILLed at EVENT_MS: its generator stops; A and B keep 1.33× the rate
  ...both('kill', 'peer SIGKILLed mid-run (C of A, B, C), 2× then 1.33×', 3, [
    [0, 2 / 3, 2],
    [1, 2 / 3, 2],
    [2, 2 / 3, 2],
  ]),
  // D (index 5) starts at EVENT_MS and sends from when it is ready: 2× then 2.67×
  ...both('join', 'peer joining mid-run (D joins A, B), 2× then 2.67×', 3, [
    [0, 1, 2],
    [1, 1, 2],
    [5, 2 / 3, 2],
  ]),
];

interface Row {
  shape: Shape;
  windows: number[];
  first: number;
  minAfter: number;
  meanAfter: number;
  /** Windows after convergence left out of min/mean: the gateways were offered less than the rate in them. */
  unsteady: number;
  max3: number;
  offered: number;
  refused: number;
  other: number;
}

/**
 * Windows of per from the shape's first admission; "after" = windows starting ≥ `convergedMs` after it in
 * which the gateways answered at least `rate` requests (the lower bound holds while demand stays ≥ rate: a
 * client slowed by a loaded machine, or one connection waiting on its answers, may offer less).
 */
function row(shape: Shape, up: Recorder, t: Totals, convergedMs: number): Row {
  const times = up.times(shape.name);
  const perMs = shape.per * 1000;
  const t0 = times[0] ?? 0;
  const count = Math.floor((RUN_MS - 500) / perMs);
  const w = windows(times, t0, perMs, count);
  const answered = windows(t.answered, t0, perMs, count);
  const from = Math.ceil(convergedMs / perMs);
  const later = w.map((n, k) => ({ n, k })).filter(({ k }) => k >= from);
  const after = later.filter(({ k }) => answered[k]! >= shape.rate).map(({ n }) => n);
  return {
    shape,
    windows: w,
    first: w[0] ?? 0,
    minAfter: after.length ? Math.min(...after) / shape.rate : NaN,
    meanAfter: after.length ? after.reduce((a, b) => a + b, 0) / after.length / shape.rate : NaN,
    unsteady: later.length - after.length,
    max3: maxInAnySpan(times, 3 * perMs),
    offered: t.answered.length / (RUN_MS / 1000) / (shape.rate / shape.per),
    refused: t.refused,
    other: t.other,
  };
}

function print(title: string, rows: Row[]): void {
  console.log(`\n${title}\n`);
  console.log(
    '| traffic | limit | admitted per window of per | first window | min window / rate after convergence | mean after | windows left out (demand < rate) | max in any 3 × per / (3 × rate) | offered × rate | 429 / other |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const s = r.shape;
    const cap = Math.floor(1.1 * 3 * s.rate) + (s.rate < s.gateways ? s.gateways : 0);
    console.log(
      `| ${s.label} | ${s.rate}/${s.per} s | ${r.windows.join(' ')} | ${r.first} | ${fmt(r.minAfter)} | ${fmt(r.meanAfter)} | ${r.unsteady} | ${fmt(r.max3 / (3 * s.rate))} (${r.max3}, bound ${cap}) | ${fmt(r.offered)} | ${r.refused} / ${r.other} |`,
    );
  }
}

interface Totals {
  /** When each request was answered (ms): the demand the gateways saw. */
  answered: number[];
  refused: number;
  other: number;
  /** 200s answered, by gateway index */
  okBy: Map<number, number>;
}

/** Runs `shapes` at once on `gws` for RUN_MS; `events` runs beside them and may add gateways to `gws`. */
async function runShapes(
  shapes: Shape[],
  gws: (Standalone | undefined)[],
  stopFor: (gateway: number) => () => boolean,
  events: Promise<void> = Promise.resolve(),
): Promise<Map<string, Totals>> {
  const plan = shapes.flatMap((s) => s.load.map(([g, rate, connections]) => ({ s, g, rate, connections })));
  const results = await Promise.all([
    ...plan.map(async ({ s, g, rate, connections }) => {
      const t = Date.now();
      // a gateway that joins later: its generator waits for it, then runs for the rest of the run
      while (!gws[g] && Date.now() - t < RUN_MS) await sleep(50);
      const gw = gws[g];
      if (!gw) return { s, g, sent: [] as number[], ok: 0, refused: 0, other: 0 };
      const r = await drive(
        { origin: gw.gateway, path: `/${s.name}/x`, rate, ms: RUN_MS - (Date.now() - t), connections },
        stopFor(g),
      );
      return { s, g, sent: r.sent, ok: r.ok, refused: r.refused, other: r.other };
    }),
    events.then(() => undefined),
  ]);
  const out = new Map<string, Totals>();
  for (const r of results) {
    if (!r) continue;
    const o = out.get(r.s.name) ?? { answered: [], refused: 0, other: 0, okBy: new Map<number, number>() };
    o.okBy.set(r.g, (o.okBy.get(r.g) ?? 0) + r.ok);
    out.set(r.s.name, {
      answered: merged(o.answered, r.sent),
      refused: o.refused + r.refused,
      other: o.other + r.other,
      okBy: o.okBy,
    });
  }
  return out;
}

async function main(): Promise<void> {
  bounded('bench-drl shapes', 300);
  console.log(`DRL shapes: ${conditions()}`);
  const redis = track(await startRedis());
  const up = await startRecorder();
  const dir = scratch('gw-bench-drl-');
  const cfgDir = scratch('gw-bench-drl-cfg-');
  try {
    for (const s of [...SHAPES, ...PEER_SHAPES])
      writeFileSync(join(dir, `${s.name}.yaml`), apiYaml(s.name, up.url, s.rate, s.per));
    writeFileSync(join(dir, 'warm.yaml'), apiYaml('warm', up.url, 1_000_000, 1));
    const cfg = join(cfgDir, 'gw.yaml');
    writeFileSync(cfg, `drl_threshold: 0\ndrl_notification_frequency: ${HEARTBEAT_S}\n`);
    const start = (db: number): Promise<Standalone> =>
      startStandalone(dir, ['--redis', `${redis.url}/${db}`, '--config', cfg], {}, { readyTimeoutMs: 60_000 }).then(
        track,
      );
    // A, B, C on database 0; P, Q (a group of two) on database 1; D joins A, B, C in the second run
    const gws: (Standalone | undefined)[] = await Promise.all([start(0), start(0), start(0), start(1), start(1)]);
    await Promise.all(
      gws.map((g) => drive({ origin: g!.gateway, path: '/warm/x', rate: 100, ms: 1500, connections: 2 })),
    );

    const r1 = await runShapes(SHAPES, gws, () => () => false);
    print(
      `Run 1 (${RUN_MS / 1000} s, every shape at once; convergence = 2 heartbeats = ${2 * HEARTBEAT_S} s): ${conditions()}`,
      SHAPES.map((s) => {
        const o = r1.get(s.name)!;
        return row(s, up, o, 2 * HEARTBEAT_S * 1000);
      }),
    );

    // the second run: C SIGKILLed and D started at EVENT_MS
    let killed = false;
    let joinedAt = 0;
    const t0 = Date.now();
    const events = (async () => {
      await sleep(EVENT_MS);
      gws[2]!.proc.kill('SIGKILL');
      killed = true;
      gws[5] = await start(0);
      joinedAt = Date.now() - t0;
    })();
    const r2 = await runShapes(PEER_SHAPES, gws, (g) => () => g === 2 && killed, events);
    print(
      `Run 2 (${RUN_MS / 1000} s; C SIGKILLed at ${EVENT_MS / 1000} s, D ready at ${fmt(joinedAt / 1000, 1)} s; "after" = windows starting ≥ 2 heartbeats after the event): ${conditions()}`,
      PEER_SHAPES.map((s) => {
        const o = r2.get(s.name)!;
        const event = s.name.startsWith('kill') ? EVENT_MS : joinedAt;
        return row(s, up, o, event + 2 * HEARTBEAT_S * 1000);
      }),
    );
    const byGateway = (name: string): string =>
      [...r2.get(name)!.okBy].map(([g, n]) => `${'ABCPQD'[g]} ${n}`).join(', ');
    console.log(
      `\nadmitted by gateway: join ${byGateway('join')}; join2 ${byGateway('join2')}; kill ${byGateway('kill')}; kill2 ${byGateway('kill2')}`,
    );
  } finally {
    await stopAll();
    await up.close();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
