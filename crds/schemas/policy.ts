/** Policy: limits, quota and access rights applied to keys through apply_policies. */
import { z } from 'zod';
import { AccessRights } from './access-definition.js';
import { FreeObject, PerSeconds, Rate, Smoothing, StringList } from './common.js';

export const PolicySpec = z
  .strictObject({
    name: z.string().optional().describe('Human-readable name.'),
    active: z.boolean().default(true).describe('An inactive policy is not applied.'),
    rate: Rate.optional(),
    per: PerSeconds.optional(),
    smoothing: Smoothing.nullable().optional(),
    quota_max: z.number().int().optional().describe('Requests per quota period; 0 or less is unlimited.'),
    quota_renewal_rate: z.number().int().optional().describe('Quota period in seconds; 0 or less never renews.'),
    throttle_interval: z.number().min(0).optional().describe('Seconds to wait before re-checking a refused request.'),
    throttle_retry_limit: z.number().int().min(0).optional().describe('How many times a refused request is re-checked.'),
    access_rights: AccessRights.optional(),
    meta_data: FreeObject.optional().describe('Metadata merged into keys; may hold rate_limit_pattern.'),
    tags: StringList.optional().describe('Free-form tags.'),
  })
  .describe('A security policy applied to keys.');

export type PolicySpecT = z.infer<typeof PolicySpec>;
