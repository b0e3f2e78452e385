/** OAuthClient: an OAuth client registered for one API. */
import { z } from 'zod';
import { FreeObject, SecretRef } from './common.js';

export const DcrRegistration = z
  .strictObject({
    access_token: z.string().default('').describe('Access token of the dynamic client registration.'),
    client_uri: z.string().default('').describe('Client URI of the registration.'),
    provider: z.string().default('').describe('Identity provider of the registration.'),
  })
  .describe('Dynamic client registration data.');

/** An OAuth client id: the same rule for a manifest, a CR and the facade's body. */
export const ClientId = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces');

export const OAuthClientSpec = z
  .strictObject({
    api_id: z.string().min(1).describe('API the client belongs to.'),
    client_id: ClientId.describe('OAuth client id.'),
    client_name: z.string().optional().describe('Display name of the client.'),
    description: z.string().optional().describe('Free-form description.'),
    policy_id: z.string().optional().describe('Policy (metadata.name) applied to tokens of this client.'),
    redirect_uri: z.string().optional().describe('Redirect URI(s) registered for the client.'),
    meta_data: FreeObject.optional().describe('Free-form metadata.'),
    secretRef: SecretRef.describe('Secret holding the client secret.'),
    dcr_registration: DcrRegistration.optional(),
  })
  .describe('An OAuth client of an API.');

export type OAuthClientSpecT = z.infer<typeof OAuthClientSpec>;
