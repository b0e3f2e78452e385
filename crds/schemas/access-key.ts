/** AccessKey: the session object of one key (docs/contract.md#key-body) plus where the key material lives. */
import { z } from 'zod';
import { AccessRights } from './access-definition.js';
import {
  FreeObject,
  PER_RULE,
  PerSeconds,
  QuotaMax,
  QuotaRemaining,
  QuotaRenewalRate,
  Rate,
  refinePer,
  SecretRef,
  Smoothing,
  StringList,
  ThrottleInterval,
  ThrottleRetryLimit,
} from './common.js';

/** The fields of the key body of POST /gw/keys/{keyID}: every field of docs/contract.md#key-body, all optional. */
const KeySessionFields = z.strictObject({
  access_rights: AccessRights.nullable()
    .optional()
    .describe('Map from an API id to its access definition; empty = every API.'),
  alias: z.string().optional().describe('Human-readable alias of the key.'),
  allowance: z.number().optional().describe('Requests left in the current window; set it equal to rate.'),
  apply_policies: z
    .array(z.string().min(1, 'a policy name cannot be empty'))
    .nullable()
    .optional()
    .describe('Policy names to apply.'),
  apply_policy_id: z.string().optional().describe('Deprecated; use apply_policies.'),
  basic_auth_data: FreeObject.optional().describe('Basic-auth data (kept as given).'),
  certificate: z
    .string()
    .optional()
    .describe(
      "SHA-256 fingerprint of the client certificate's DER (hex; colons and case ignored): the key is refused (403) unless the request came over TLS with that certificate.",
    ),
  data_expires: z
    .number()
    .int()
    .optional()
    .describe('Analytics retention of the key (kept for compatibility; not used by gw).'),
  date_created: z.string().datetime({ offset: true }).optional().describe('When the key was created (RFC 3339).'),
  enable_detail_recording: z.boolean().optional().describe('Deprecated; use enable_detailed_recording.'),
  enable_detailed_recording: z
    .boolean()
    .optional()
    .describe('Detailed analytics recording (kept for compatibility; not used by gw).'),
  enable_http_signature_validation: z
    .boolean()
    .optional()
    .describe('HTTP signature validation (kept for compatibility; not used by gw).'),
  expires: z.number().int().optional().describe('Unix seconds after which the key is refused; 0 = never.'),
  hmac_enabled: z.boolean().optional().describe('HMAC request signing (kept for compatibility; not used by gw).'),
  hmac_string: z.string().optional().describe('HMAC secret (kept for compatibility; not used by gw).'),
  id_extractor_deadline: z
    .number()
    .int()
    .optional()
    .describe('ID extractor cache deadline (kept for compatibility; not used by gw).'),
  is_inactive: z.boolean().optional().describe('An inactive key is refused with 403.'),
  jwt_data: FreeObject.optional().describe('JWT data (kept as given).'),
  last_check: z.number().int().optional().describe('Unix seconds of the last check (informational).'),
  last_updated: z.string().optional().describe('When the session was last updated (informational).'),
  max_query_depth: z
    .number()
    .int()
    .optional()
    .describe('Largest GraphQL query depth (kept for compatibility; not used by gw).'),
  meta_data: FreeObject.nullable()
    .optional()
    .describe("Free-form metadata; a policy's rate_limit_pattern may reference it as $gw_meta.NAME."),
  monitor: FreeObject.optional().describe('Quota monitor triggers (kept as given; not used by gw).'),
  oauth_client_id: z.string().optional().describe('OAuth client the key was issued to.'),
  oauth_keys: FreeObject.nullable().optional().describe('OAuth keys (kept as given).'),
  org_id: z.string().optional().describe('Organisation id.'),
  per: PerSeconds.optional().describe('Key-level window in seconds.'),
  quota_max: QuotaMax,
  quota_remaining: QuotaRemaining,
  quota_renewal_rate: QuotaRenewalRate,
  quota_renews: z
    .number()
    .int()
    .optional()
    .describe('Unix seconds when the quota renews (kept current by the gateway).'),
  rate: Rate.optional().describe('Key-level requests per window (global: shared by every API the key reaches).'),
  rsa_certificate_id: z.string().optional().describe('RSA certificate id (kept for compatibility; not used by gw).'),
  session_lifetime: z
    .number()
    .int()
    .optional()
    .describe('Session lifetime in seconds (kept for compatibility; not used by gw).'),
  smoothing: Smoothing.nullable().optional().describe('Rate limit smoothing of the key-level global limit.'),
  tags: StringList.nullable().optional().describe('Free-form tags.'),
  throttle_interval: ThrottleInterval.optional(),
  throttle_retry_limit: ThrottleRetryLimit.optional(),
});

/** The key body of POST /gw/keys/{keyID}. */
export const KeySession = KeySessionFields.meta({ 'x-kubernetes-validations': [PER_RULE] }).superRefine(refinePer);

export const KeyHash = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lower-case SHA-256 hex digest');

export const AccessKeySpec = KeySessionFields.extend({
  secretRef: SecretRef.optional().describe('Secret holding the raw key; generated when the Secret does not exist.'),
  key_hash: KeyHash.optional().describe('SHA-256 hex of the raw key (the raw key is never stored).'),
})
  .meta({
    'x-kubernetes-validations': [
      {
        rule: 'has(self.secretRef) != has(self.key_hash)',
        message: 'exactly one of secretRef and key_hash is required',
      },
      PER_RULE,
    ],
  })
  .superRefine((spec, ctx) => {
    if (!!spec.secretRef === !!spec.key_hash) {
      ctx.addIssue({
        code: 'custom',
        path: ['secretRef'],
        message: 'exactly one of secretRef and key_hash is required',
      });
    }
    refinePer(spec, ctx);
  })
  .describe('An access key and its session.');

/**
 * The fields of an AccessKey's status the controller records and the facade reads: `keyHash`, the hash whose
 * session the AccessKey owns (a key kept in a Secret has no spec.key_hash), and `quotaReset`, the last
 * gw.io/quota-reset token the controller acted on (contract/annotations.ts). Other status fields pass.
 */
export const AccessKeyStatus = z.looseObject({ keyHash: KeyHash.optional(), quotaReset: z.string().optional() });

export type KeySessionT = z.infer<typeof KeySession>;
export type AccessKeySpecT = z.infer<typeof AccessKeySpec>;
