/** Builders shared by the engine tests. */
import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions, type GatewayOptionsT } from '../../../lib/options.js';
import type { StoredSession } from '../../../contract/sessions.js';
import type { KeySessionT } from '../../../crds/schemas/access-key.js';
import type { PolicySpecT } from '../../../crds/schemas/policy.js';
import type { CompiledApi, CompiledConfig, EndpointRule, LimitSpec } from '../../../contract/config.js';
import {
  createEngine,
  type EngineDeps,
  type EngineSmoothingEvent,
  type GatewayEngine,
} from '../../../sidecar/engine/engine.js';
import type { Verdict } from '../../../sidecar/engine/types.js';
import type { SmoothingEvent } from '../../../limiters/types.js';

export const T0 = 1_700_000_040_000; // a multiple of 60 s: windows start here

export function options(o: Partial<GatewayOptionsT> = {}): GatewayOptionsT {
  return GatewayOptions.parse(o);
}

export function api(apiId: string, o: Partial<CompiledApi> = {}): CompiledApi {
  return {
    namespace: 'default',
    name: apiId,
    api_id: apiId,
    active: true,
    keyless: false,
    authHeader: 'authorization',
    listenPath: `/${apiId}/`,
    strip: true,
    endpointRules: [],
    ...o,
  };
}

export function rule(
  method: string,
  pattern: string,
  rate: number,
  per: number,
  id = `${method} ${pattern}`,
): EndpointRule {
  return { method, pattern, rate, per, id };
}

export function config(policies: Record<string, Partial<PolicySpecT>> = {}, apis: CompiledApi[] = []): CompiledConfig {
  return {
    hash: JSON.stringify(policies),
    apis,
    policies: Object.fromEntries(
      Object.entries(policies).map(([name, spec]) => [
        `default/${name}`,
        { namespace: 'default', name, spec: { active: true, ...spec } },
      ]),
    ),
  };
}

export function session(s: KeySessionT): StoredSession {
  return { namespace: 'default', session: s };
}

export interface Harness {
  clock: ManualClock;
  engine: GatewayEngine;
  events: EngineSmoothingEvent[];
  storeErrors: Error[];
  /** Fires n checks one after the other; returns the verdict kinds. */
  fire(n: number, req: Parameters<GatewayEngine['check']>[0]): Promise<Verdict['kind'][]>;
}

export function harness(
  o: Partial<GatewayOptionsT> = {},
  cfg: CompiledConfig = config(),
  deps: Partial<EngineDeps> = {},
): Harness {
  const clock = new ManualClock(T0);
  const events: EngineSmoothingEvent[] = [];
  const storeErrors: Error[] = [];
  const engine = createEngine({
    options: options(o),
    clock,
    config: () => cfg,
    onSmoothingEvent: (e) => events.push(e),
    onStoreError: (e) => storeErrors.push(e),
    ...deps,
  });
  return {
    clock,
    engine,
    events,
    storeErrors,
    async fire(n, req) {
      const out: Verdict['kind'][] = [];
      for (let i = 0; i < n; i++) out.push((await engine.check(req)).kind);
      return out;
    },
  };
}

export const count = <T>(xs: T[], x: T): number => xs.filter((y) => y === x).length;

/**
 * A scripted request-rate curve (requests per second, for 1 s steps) over a 10 s window: the allowance
 * climbs by steps to rate, holds, and falls back to threshold, with the hold-off between events.
 * threshold 4, step 4, trigger 0.5, delay 3 s, rate 16 → up when R > A − 2, down when R < A − 6.
 */
export const CURVE_LIMIT = {
  rate: 16,
  per: 10,
  smoothing: { enabled: true, threshold: 4, step: 4, trigger: 0.5, delay: 3 },
};
export const CURVE: number[] = [
  ...[1, 1, 1], // seconds 0–2
  ...Array<number>(10).fill(3), // 3–12: 3 req/s, well above the allowance
  ...Array<number>(11).fill(0), // 13–23: quiet, the window empties
  ...[1, 0, 0, 1], // 24–27
  ...Array<number>(10).fill(0), // 28–37
  ...[1, 0, 0, 1], // 38–41
];
/** [second, event, old, new]: expected from the rule, checked against the memory and Redis limiters. */
export const CURVE_EVENTS: [number, string, number, number][] = [
  [2, 'RateLimitSmoothingUp', 4, 8], // R = 3 > 4 − 2; the first event needs no hold-off
  [5, 'RateLimitSmoothingUp', 8, 12], // R > 6 since second 3, but the hold-off (3 s) holds it until 5
  [8, 'RateLimitSmoothingUp', 12, 16], // R = 19 > 10 after the next hold-off; clamped at rate
  [24, 'RateLimitSmoothingDown', 16, 12], // first request after the quiet spell: R = 1 < 10
  [27, 'RateLimitSmoothingDown', 12, 8], // R = 2 < 6 once the hold-off is over
  [38, 'RateLimitSmoothingDown', 8, 4], // R = 1 < 2: back to threshold; at 41 (R = 2) nothing moves
];

/** Drives a limiter with CURVE; returns events as [second, event, old, new] and the allowance after each second. */
export async function driveCurve(
  check: (now: number) => { limit: number } | Promise<{ limit: number }>,
  clock: ManualClock,
  events: SmoothingEvent[],
): Promise<{ events: [number, string, number, number][]; allowance: number[] }> {
  const allowance: number[] = [];
  let last = 4;
  for (let sec = 0; sec < CURVE.length; sec++) {
    const n = CURVE[sec]!;
    for (let i = 0; i < n; i++) {
      clock.set(T0 + sec * 1000 + i * 10);
      last = (await check(clock.now())).limit;
    }
    allowance.push(last);
  }
  return {
    events: events.map((e) => [Math.floor((Date.parse(e.time) - T0) / 1000), e.event, e.oldAllowance, e.newAllowance]),
    allowance,
  };
}

type Checked = { allowed: boolean; limit: number };

/**
 * A smoothed limit edited while its allowance is stored (docs/contract.md#smoothing: A stays in [threshold, rate]): A is
 * lifted to 12 of 12/3 s, the window empties, then the rate is lowered to 6 (a burst of 30 must get at
 * most 6, and no header above 6), then the threshold raised to 10 under rate 12 (a burst of 20 must get
 * at least 10). Returns what each phase saw. Shared by the memory and the Redis sliding log.
 */
export async function editedSmoothedLimit(
  check: (limit: LimitSpec) => Checked | Promise<Checked>,
  clock: ManualClock,
): Promise<{ lifted: number; lowered: { admitted: number; maxLimit: number }; raised: number }> {
  const sm = (threshold: number, step: number) => ({ enabled: true, threshold, step, trigger: 0.5, delay: 1 });
  let lifted = 0;
  for (let i = 0; i < 40; i++) {
    lifted = (await check({ rate: 12, per: 3, smoothing: sm(4, 4) })).limit;
    clock.advance(100);
  }
  clock.advance(3_500);
  const lowered = { admitted: 0, maxLimit: 0 };
  for (let i = 0; i < 30; i++) {
    const r = await check({ rate: 6, per: 3, smoothing: sm(2, 2) });
    if (r.allowed) lowered.admitted++;
    lowered.maxLimit = Math.max(lowered.maxLimit, r.limit);
  }
  clock.advance(3_500);
  let raised = 0;
  for (let i = 0; i < 20; i++) if ((await check({ rate: 12, per: 3, smoothing: sm(10, 1) })).allowed) raised++;
  return { lifted, lowered, raised };
}

/**
 * A steady 8 requests/s for 8 s against a smoothed 20/4 s (threshold 4, step 2, trigger 0.5, delay 1 s)
 * under the sentinel: the allowance must climb once per hold-off while the sentinel refuses (docs/contract.md#smoothing),
 * and each refusal's X-RateLimit-Limit must be the smoothed allowance, not the rate. `settle` lets
 * background store writes land after each request. Shared by the memory and the Redis sentinel.
 */
export async function steadyUnderSentinel(
  check: (limit: LimitSpec) => Checked | Promise<Checked>,
  settle: () => Promise<void>,
  clock: ManualClock,
  events: SmoothingEvent[],
): Promise<{ ups: number[]; refusalLimits: number[] }> {
  const limit = { rate: 20, per: 4, smoothing: { enabled: true, threshold: 4, step: 2, trigger: 0.5, delay: 1 } };
  const start = clock.now();
  const refusalLimits: number[] = [];
  for (let i = 0; i < 64; i++) {
    const r = await check(limit);
    if (!r.allowed) refusalLimits.push(r.limit);
    await settle();
    clock.advance(125);
  }
  const ups = events.filter((e) => e.event === 'RateLimitSmoothingUp').map((e) => Date.parse(e.time) - start);
  return { ups, refusalLimits };
}
