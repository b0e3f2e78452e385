/**
 * Smoothing events travel from sidecars to the controller over Redis pub/sub, so the controller can turn
 * them into Kubernetes Events on the AccessKey or Policy that configured the limit. The payload never
 * holds a raw key: the limiter key carries the key hash or the custom rate-limit pattern.
 */
import { z } from 'zod';

export const SMOOTHING_CHANNEL = 'gw:events:smoothing';

export const SmoothingEventPayload = z.object({
  event: z.enum(['RateLimitSmoothingUp', 'RateLimitSmoothingDown']),
  api_id: z.string(),
  limiter_key: z.string(),
  old_allowance: z.number(),
  new_allowance: z.number(),
  time: z.string(),
  /** Namespace of the sidecar that saw it. */
  namespace: z.string(),
  /** The Policy (in that namespace) whose limit and smoothing the bucket follows; absent: the key's own or the API's. */
  policy: z.string().optional(),
});
export type SmoothingEventPayloadT = z.infer<typeof SmoothingEventPayload>;
