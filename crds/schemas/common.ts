/** Building blocks shared by the four resource kinds. Descriptions end up in the CRDs (kubectl explain). */
import { z } from 'zod';
import { DURATION_PATTERN } from '../../lib/duration.js';

export const Rate = z.number().min(0).describe('Maximum requests permitted per window.');
export const PerSeconds = z.number().min(0).describe('Window length in seconds.');

/** Duration notation of the OAS form and of streams: numbers followed by ms, s, m or h (e.g. "10s", "1m30s"). */
export const DurationString = z
  .string()
  .regex(DURATION_PATTERN, 'must be a duration such as 10s, 500ms, 1m, 1h or 1m30s')
  .describe('Duration: a number followed by ms, s, m or h, or a sequence of them, for example 10s or 1m30s.');

const PER_MESSAGE = 'per must be greater than 0 when rate is greater than 0 (rate and per both 0 disable the limit)';

/** A rate needs a window: rate > 0 with per 0 or no per is refused. The CEL form for the CRDs: */
export const PER_RULE = {
  rule: '!has(self.rate) || self.rate <= 0 || (has(self.per) && self.per > 0)',
  message: PER_MESSAGE,
};

/** The zod form of PER_RULE, for a superRefine of an object holding rate and per. */
export function refinePer(v: { rate?: number; per?: number }, ctx: z.RefinementCtx): void {
  // a negative per has its own error already
  if (v.rate !== undefined && v.rate > 0 && (v.per === undefined || v.per === 0))
    ctx.addIssue({ code: 'custom', path: ['per'], message: PER_MESSAGE });
}

export const RateLimitPair = z
  .strictObject({ rate: Rate, per: PerSeconds })
  .meta({ 'x-kubernetes-validations': [PER_RULE] })
  .superRefine(refinePer)
  .describe('A rate limit: rate requests per per seconds. rate and per both 0 disable the limiter.');

/** An HTTP header name: an RFC 9110 token (no spaces or separators). */
export const HEADER_NAME_PATTERN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Whose allowance an API-level limit is (docs/contract.md#limit-by): `api` one for every caller, `ip` one per client
 * address, `header:NAME` one per value of that request header (a request without it shares the empty
 * value's). Absent = `api`.
 */
export const LimitBy = z
  .string()
  .regex(
    new RegExp(`^(api|ip|header:${HEADER_NAME_PATTERN.source.slice(1, -1)})$`),
    'must be api, ip or header:NAME, NAME an HTTP header name (a token: no spaces or separators), e.g. header:X-Tenant',
  )
  .describe(
    "Whose allowance this is: api (one for every caller, the default), ip (one per client address; see trusted_proxies) or header:NAME (one per value of that request header; a request without it shares the empty value's).",
  );

/** An API-level limit: a rate limit pair, with whose allowance it is. */
export const ApiRateLimit = z
  .strictObject({ rate: Rate, per: PerSeconds, limit_by: LimitBy.optional() })
  .meta({ 'x-kubernetes-validations': [PER_RULE] })
  .superRefine(refinePer)
  .describe(
    'An API-level rate limit: rate requests per per seconds (rate and per both 0 disable the limiter), per limit_by.',
  );

export const Smoothing = z
  .strictObject({
    enabled: z.boolean().describe('Turns smoothing on or off.'),
    threshold: z.number().min(0).default(0).describe('Initial (lowest) current allowance; the lower bound.'),
    step: z
      .number()
      .min(0)
      .default(0)
      .describe('Amount by which the current allowance moves on each smoothing event (0: no movement, smoothing off).'),
    trigger: z
      .number()
      .min(0)
      .default(0.5)
      .describe('Fraction of step that sets the point at which a smoothing event fires (typically 0.1 to 1.0).'),
    delay: z.number().min(0).default(30).describe('Hold-off in seconds between smoothing events.'),
  })
  .describe('Rate limit smoothing (sliding window log and sentinel limiters only). The upper bound is rate.');

/** Throttling (docs/contract.md#throttling); Tyk writes -1 for "off", so any value ≤ 0 is accepted and means no throttling. */
/** The quota fields of a key's session, an access right and a policy (optional, each described once). */
export const QuotaMax = z.number().int().optional().describe('Requests per quota period; 0 or less is unlimited.');
export const QuotaRemaining = z
  .number()
  .int()
  .optional()
  .describe('Requests left in the current quota period (kept current by the gateway).');
export const QuotaRenewalRate = z
  .number()
  .int()
  .optional()
  .describe('Quota period in seconds; 0 or less never renews.');
export const ThrottleInterval = z
  .number()
  .describe('Seconds to wait before re-checking a request refused by the key-level limit (≤ 0: no wait).');
export const ThrottleRetryLimit = z
  .number()
  .int()
  .describe('How many times a refused request is re-checked before its 429 (≤ 0: no throttling).');

/** Free-form object: kept as given (x-kubernetes-preserve-unknown-fields in the CRD). */
export const FreeObject = z.record(z.string(), z.unknown()).meta({ 'x-kubernetes-preserve-unknown-fields': true });

export const StringList = z.array(z.string()).describe('A list of strings.');

export const SecretRef = z
  .strictObject({
    name: z.string().min(1).describe('Name of the Secret in the same namespace.'),
    key: z.string().min(1).default('key').describe('Key inside the Secret data.'),
  })
  .describe('Reference to a key of a Secret in the same namespace.');

export const ReadyCondition = z
  .object({
    type: z.string().describe('Condition type; gw writes Ready.'),
    status: z.enum(['True', 'False', 'Unknown']).describe('True, False or Unknown.'),
    reason: z.string().optional().describe('One-word CamelCase reason for the last transition.'),
    message: z.string().optional().describe('Human-readable detail, e.g. what a reference is missing.'),
    lastTransitionTime: z.string().optional().describe('When the status last changed (RFC 3339).'),
    observedGeneration: z.number().int().optional().describe('metadata.generation the condition was computed from.'),
  })
  .describe('A status condition (Kubernetes conventions).');

export const Status = z
  .object({
    observedGeneration: z.number().int().optional().describe('metadata.generation the controller last acted on.'),
    conditions: z
      .array(ReadyCondition)
      .optional()
      .describe('Conditions; Ready tells whether the resource is in effect.'),
  })
  .meta({ 'x-kubernetes-preserve-unknown-fields': true })
  .describe('Observed state written by the controller.');

export type RateLimitPairT = z.infer<typeof RateLimitPair>;
export type LimitByT = z.infer<typeof LimitBy>;
export type SmoothingT = z.infer<typeof Smoothing>;

/** The methods an endpoint rule may name (RFC 9110 §9 and PATCH); a rule on another word would never match. */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE'];
const anyCase = (m: string): string => [...m].map((c) => `[${c}${c.toLowerCase()}]`).join('');

// any case, matched upper-cased; the pattern spells the cases out so the CRD's pattern says the same
export const HttpMethod = z
  .string()
  .regex(
    new RegExp(`^(${HTTP_METHODS.map(anyCase).join('|')}|\\*)$`),
    `must be an HTTP method (${HTTP_METHODS.join(', ')}; any case), or *`,
  )
  .describe('HTTP method (any case; matched upper-cased), or * for any.');
