/** One entry of access_rights (keys and policies): which API, which URLs, and per-API / per-endpoint limits. */
import { z } from 'zod';
import { MAX_ACCESS_RIGHTS, MAX_PATTERNS_PER_RIGHT, pathPattern } from './path-pattern.js';
import {
  HttpMethod,
  PER_RULE,
  PerSeconds,
  QuotaMax,
  QuotaRemaining,
  QuotaRenewalRate,
  Rate,
  RateLimitPair,
  refinePer,
  Smoothing,
  StringList,
  ThrottleInterval,
  ThrottleRetryLimit,
} from './common.js';

export const ApiLimit = z
  .strictObject({
    rate: Rate.optional(),
    per: PerSeconds.optional(),
    quota_max: QuotaMax,
    quota_remaining: QuotaRemaining,
    quota_renewal_rate: QuotaRenewalRate,
    throttle_interval: ThrottleInterval.optional(),
    throttle_retry_limit: ThrottleRetryLimit.optional(),
    smoothing: Smoothing.nullable().optional(),
  })
  .meta({ 'x-kubernetes-validations': [PER_RULE] })
  .superRefine(refinePer)
  .describe(
    'Per-API limit of a key or policy; its throttle fields, when set, apply to its per-API and per-endpoint limits.',
  );

export const EndpointLimit = z
  .strictObject({
    path: pathPattern('Endpoint path (literal, {name} wildcards or a regex).'),
    methods: z
      .array(z.strictObject({ name: HttpMethod, limit: RateLimitPair }).describe('A method and its limit.'))
      .min(1)
      .describe('Methods of the path, each with its own limit.'),
  })
  .describe('Per-endpoint limit: a rate limit for one path and its methods.');

export const AccessDefinition = z
  .strictObject({
    api_id: z.string().optional().describe('API id (default: the map key).'),
    api_name: z.string().optional().describe('Name of the API, informational.'),
    versions: StringList.optional().describe('API versions the key may use.'),
    allowed_urls: z
      .array(
        z
          .strictObject({
            url: pathPattern('URL pattern (regex) relative to the listen path.'),
            methods: StringList.describe('HTTP methods allowed on the URL.'),
          })
          .describe('An allowed URL and its methods.'),
      )
      .max(MAX_PATTERNS_PER_RIGHT)
      .optional()
      .describe('When non-empty, only these URL patterns and methods are allowed.'),
    limit: ApiLimit.nullable().optional(),
    endpoints: z
      .array(EndpointLimit)
      .max(MAX_PATTERNS_PER_RIGHT)
      .optional()
      .describe('Per-endpoint limits of this API.'),
  })
  .describe('Access definition of one API.');

const API_ID_MESSAGE = 'api_id must equal the map key (the API id) or be left out';

export const AccessRights = z
  .record(z.string(), AccessDefinition)
  .meta({
    maxProperties: MAX_ACCESS_RIGHTS,
    'x-kubernetes-validations': [
      {
        rule: "self.all(k, !has(self[k].api_id) || self[k].api_id == '' || self[k].api_id == k)",
        message: API_ID_MESSAGE,
      },
    ],
  })
  .superRefine((rights, ctx) => {
    const n = Object.keys(rights).length;
    if (n > MAX_ACCESS_RIGHTS)
      ctx.addIssue({ code: 'custom', message: `at most ${MAX_ACCESS_RIGHTS} APIs (${n} given)` });
    for (const [k, d] of Object.entries(rights)) {
      if (d.api_id && d.api_id !== k)
        ctx.addIssue({
          code: 'custom',
          path: [k, 'api_id'],
          message: `${API_ID_MESSAGE} (${JSON.stringify(d.api_id)} under ${JSON.stringify(k)})`,
        });
    }
  })
  .describe('Map from an API id to its access definition.');

export type AccessDefinitionT = z.infer<typeof AccessDefinition>;
export type ApiLimitT = z.infer<typeof ApiLimit>;
