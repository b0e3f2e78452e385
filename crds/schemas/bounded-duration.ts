/**
 * Duration strings with a range, for the streams' timers and windows. zod checks the range and the CRD
 * carries its CEL twin: Kubernetes CEL's duration() parses the same notation (Go's time.ParseDuration;
 * our pattern is a subset of it), so the API server refuses what zod refuses. A duration too large for Go
 * (about 2562047h) makes the CEL rule fail to evaluate, which the API server also reports as invalid.
 */
import { z } from 'zod';
import { DURATION_PATTERN, durationMs } from '../../lib/duration.js';

/** Longest duration string accepted (bounds the cost of the CEL rules). */
const MAX_LENGTH = 32;

export interface DurationBounds {
  /** Smallest accepted duration, e.g. '1ms' (or '0s'). */
  min: string;
  /** Largest accepted duration, e.g. '24h'. */
  max: string;
  /** Why the bounds are what they are, appended to the error message. */
  why: string;
}

export function boundedDuration(b: DurationBounds) {
  const minMs = durationMs(b.min);
  const maxMs = durationMs(b.max);
  const message = `must be a duration from ${b.min} to ${b.max} (${b.why})`;
  return z
    .string()
    .max(MAX_LENGTH)
    .regex(DURATION_PATTERN, 'must be a duration such as 10s, 500ms, 1m, 1h or 1m30s')
    .refine((v) => {
      if (!DURATION_PATTERN.test(v)) return true; // the pattern reports it
      const ms = durationMs(v);
      return ms >= minMs && ms <= maxMs;
    }, message)
    .meta({
      'x-kubernetes-validations': [
        { rule: `duration(self) >= duration('${b.min}') && duration(self) <= duration('${b.max}')`, message },
      ],
    });
}
