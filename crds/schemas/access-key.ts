/** AccessKey: the session object of one key (the spec's key body) plus where the key material lives. */
import { z } from 'zod';
import { AccessRights } from './access-definition.js';
import { FreeObject, PerSeconds, Rate, SecretRef, Smoothing, StringList } from './common.js';

/** The key body of POST /gw/keys/{keyID}: every field of the spec's table, all optional. */
export const KeySession = z.strictObject({
  access_rights: AccessRights.nullable().optional(),
  alias: z.string().optional(),
  allowance: z.number().optional(),
  apply_policies: StringList.nullable().optional().describe('Policy names to apply.'),
  apply_policy_id: z.string().optional().describe('Deprecated; use apply_policies.'),
  basic_auth_data: FreeObject.optional(),
  certificate: z.string().optional(),
  data_expires: z.number().int().optional(),
  date_created: z.string().datetime({ offset: true }).optional(),
  enable_detail_recording: z.boolean().optional().describe('Deprecated; use enable_detailed_recording.'),
  enable_detailed_recording: z.boolean().optional(),
  enable_http_signature_validation: z.boolean().optional(),
  expires: z.number().int().optional().describe('Unix seconds after which the key is refused; 0 = never.'),
  hmac_enabled: z.boolean().optional(),
  hmac_string: z.string().optional(),
  id_extractor_deadline: z.number().int().optional(),
  is_inactive: z.boolean().optional(),
  jwt_data: FreeObject.optional(),
  last_check: z.number().int().optional(),
  last_updated: z.string().optional(),
  max_query_depth: z.number().int().optional(),
  meta_data: FreeObject.nullable().optional(),
  monitor: FreeObject.optional(),
  oauth_client_id: z.string().optional(),
  oauth_keys: FreeObject.nullable().optional(),
  org_id: z.string().optional(),
  per: PerSeconds.optional(),
  quota_max: z.number().int().optional(),
  quota_remaining: z.number().int().optional(),
  quota_renewal_rate: z.number().int().optional(),
  quota_renews: z.number().int().optional(),
  rate: Rate.optional(),
  rsa_certificate_id: z.string().optional(),
  session_lifetime: z.number().int().optional(),
  smoothing: Smoothing.nullable().optional(),
  tags: StringList.nullable().optional(),
  throttle_interval: z.number().min(0).optional(),
  throttle_retry_limit: z.number().int().min(0).optional(),
});

export const KeyHash = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lower-case SHA-256 hex digest');

export const AccessKeySpec = KeySession.extend({
  secretRef: SecretRef.optional().describe('Secret holding the raw key; generated when the Secret does not exist.'),
  key_hash: KeyHash.optional().describe('SHA-256 hex of the raw key (the raw key is never stored).'),
})
  .meta({
    'x-kubernetes-validations': [
      { rule: 'has(self.secretRef) != has(self.key_hash)', message: 'exactly one of secretRef and key_hash is required' },
    ],
  })
  .superRefine((spec, ctx) => {
    if (!!spec.secretRef === !!spec.key_hash) {
      ctx.addIssue({ code: 'custom', path: ['secretRef'], message: 'exactly one of secretRef and key_hash is required' });
    }
  })
  .describe('An access key and its session.');

export type KeySessionT = z.infer<typeof KeySession>;
export type AccessKeySpecT = z.infer<typeof AccessKeySpec>;
