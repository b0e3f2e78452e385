/** OAuthClient: an OAuth client registered for one API. */
import { z } from 'zod';
import { FreeObject, SecretRef } from './common.js';

export const DcrRegistration = z.strictObject({
  access_token: z.string().default(''),
  client_uri: z.string().default(''),
  provider: z.string().default(''),
});

export const OAuthClientSpec = z
  .strictObject({
    api_id: z.string().min(1).describe('API the client belongs to.'),
    client_id: z.string().min(1),
    client_name: z.string().optional(),
    description: z.string().optional(),
    policy_id: z.string().optional().describe('Policy (metadata.name) applied to tokens of this client.'),
    redirect_uri: z.string().optional(),
    meta_data: FreeObject.optional(),
    secretRef: SecretRef.describe('Secret holding the client secret.'),
    dcr_registration: DcrRegistration.optional(),
  })
  .describe('An OAuth client of an API.');

export type OAuthClientSpecT = z.infer<typeof OAuthClientSpec>;
