/** One entry of access_rights (keys and policies): which API, which URLs, and per-API / per-endpoint limits. */
import { z } from 'zod';
import { PerSeconds, Rate, RateLimitPair, Smoothing, StringList } from './common.js';

export const ApiLimit = z
  .strictObject({
    rate: Rate.optional(),
    per: PerSeconds.optional(),
    quota_max: z.number().int().optional().describe('Requests per quota period; 0 or less is unlimited.'),
    quota_remaining: z.number().int().optional(),
    quota_renewal_rate: z.number().int().optional().describe('Quota period in seconds; 0 or less never renews.'),
    throttle_interval: z.number().min(0).optional().describe('Seconds to wait before re-checking a refused request.'),
    throttle_retry_limit: z.number().int().min(0).optional().describe('How many times a refused request is re-checked.'),
    smoothing: Smoothing.nullable().optional(),
  })
  .describe('Per-API limit of a key or policy.');

export const EndpointLimit = z
  .strictObject({
    path: z.string().min(1).describe('Endpoint path (literal, {name} wildcards or a regex).'),
    methods: z
      .array(z.strictObject({ name: z.string().min(1).describe('HTTP method.'), limit: RateLimitPair }))
      .min(1),
  })
  .describe('Per-endpoint limit: a rate limit for one path and its methods.');

export const AccessDefinition = z
  .strictObject({
    api_id: z.string().optional(),
    api_name: z.string().optional(),
    versions: StringList.optional(),
    allowed_urls: z
      .array(z.strictObject({ url: z.string().min(1), methods: StringList }))
      .optional()
      .describe('When non-empty, only these URL patterns and methods are allowed.'),
    limit: ApiLimit.nullable().optional(),
    endpoints: z.array(EndpointLimit).optional(),
  })
  .describe('Access definition of one API.');

export const AccessRights = z
  .record(z.string(), AccessDefinition)
  .describe('Map from an API id to its access definition.');

export type AccessDefinitionT = z.infer<typeof AccessDefinition>;
export type ApiLimitT = z.infer<typeof ApiLimit>;
