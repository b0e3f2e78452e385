/**
 * Rate-limit smoothing (docs/contract.md#smoothing): a current allowance A in [threshold, rate], starting at threshold.
 * With R the requests in the trailing window (the current one included):
 *   R > A − step·trigger and hold-off expired      → A = min(A + step, rate), RateLimitSmoothingUp
 *   R < A − step·(1 + trigger) and hold-off expired → A = max(A − step, threshold), RateLimitSmoothingDown
 *   R > A → refused.
 * A stored A outside [threshold, rate] (the limit changed since) is first brought within them.
 * The same rule runs in Lua for Redis (sliding-log.lua); this is the reference.
 */
import type { SmoothingT } from '../crds/schemas/common.js';

export interface SmoothingState {
  allowance: number;
  /** ms of the last event (0 = none yet, so the hold-off has expired). */
  lastEvent: number;
}

export function initialState(s: SmoothingT, rate: number): SmoothingState {
  return { allowance: Math.min(Math.max(s.threshold, 0), rate), lastEvent: 0 };
}

export function smoothingStep(
  state: SmoothingState,
  measured: number,
  s: SmoothingT,
  rate: number,
  nowMs: number,
): { state: SmoothingState; event?: 'RateLimitSmoothingUp' | 'RateLimitSmoothingDown'; from: number } {
  const holdOffOver = state.lastEvent === 0 || nowMs - state.lastEvent >= s.delay * 1000;
  const lower = Math.min(Math.max(s.threshold, 0), rate);
  // kept within [threshold, rate] of the limit as it is now: an allowance stored under another limit (its
  // rate lowered or its threshold raised since) would admit more than the rate, or less than the threshold
  const a = Math.min(Math.max(state.allowance, lower), rate);
  if (holdOffOver && measured > a - s.step * s.trigger && a < rate) {
    return {
      state: { allowance: Math.min(a + s.step, rate), lastEvent: nowMs },
      event: 'RateLimitSmoothingUp',
      from: a,
    };
  }
  if (holdOffOver && measured < a - s.step * (1 + s.trigger) && a > lower) {
    return {
      state: { allowance: Math.max(a - s.step, lower), lastEvent: nowMs },
      event: 'RateLimitSmoothingDown',
      from: a,
    };
  }
  return { state: a === state.allowance ? state : { allowance: a, lastEvent: state.lastEvent }, from: a };
}

export function smoothingActive(s: SmoothingT | null | undefined): s is SmoothingT {
  return !!s && s.enabled && s.step > 0;
}
