/** Policy: limits, quota and access rights applied to keys through apply_policies. */
import { z } from 'zod';
import { AccessRights } from './access-definition.js';
import {
  FreeObject,
  PER_RULE,
  PerSeconds,
  QuotaMax,
  QuotaRenewalRate,
  Rate,
  refinePer,
  Smoothing,
  StringList,
  ThrottleInterval,
  ThrottleRetryLimit,
} from './common.js';

export const PolicySpec = z
  .strictObject({
    name: z.string().optional().describe('Human-readable name.'),
    active: z.boolean().default(true).describe('An inactive policy is not applied.'),
    rate: Rate.optional(),
    per: PerSeconds.optional(),
    smoothing: Smoothing.nullable().optional(),
    quota_max: QuotaMax,
    quota_renewal_rate: QuotaRenewalRate,
    throttle_interval: ThrottleInterval.optional(),
    throttle_retry_limit: ThrottleRetryLimit.optional(),
    access_rights: AccessRights.optional(),
    meta_data: FreeObject.optional().describe('Metadata merged into keys; may hold rate_limit_pattern.'),
    tags: StringList.optional().describe('Free-form tags.'),
  })
  .meta({ 'x-kubernetes-validations': [PER_RULE] })
  .superRefine(refinePer)
  .describe('A security policy applied to keys.');

export type PolicySpecT = z.infer<typeof PolicySpec>;
