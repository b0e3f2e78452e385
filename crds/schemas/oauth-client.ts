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

/**
 * A client's redirect URI (docs/contract.md#oauth): an absolute https URL, or http on a loopback host (127.0.0.0/8,
 * [::1], localhost: a native app's local listener, RFC 8252 §7.3); no fragment (RFC 6749 §3.1.2), no
 * credentials, no whitespace. Anything else (`javascript:`, `data:`, relative, plain http elsewhere) is
 * refused. One regex (RE2- and ECMAScript-compatible) so the CRD refuses what zod refuses.
 */
export const REDIRECT_URI_PATTERN =
  '^(https://[^\\s/?#@]+|http://(localhost|127(\\.[0-9]{1,3}){3}|\\[::1\\])(:[0-9]{1,5})?)([/?][^\\s#]*)?$';
export const REDIRECT_URI_MESSAGE = 'must be an absolute https URL, or http on a loopback host, without a fragment';
/**
 * What the pattern cannot say: the URI must also parse as a WHATWG URL (a port of at most 65535, a host that
 * parses), as the browser following the redirect will parse it. The CRD has the pattern; the controller refuses the rest.
 */
const parsesAsUrl = (s: string): boolean => {
  if (s === '') return true;
  try {
    return new URL(s).host !== '';
  } catch {
    return false;
  }
};
const URL_MESSAGE = 'must parse as a URL (a valid host, a port of at most 65535)';

export const RedirectUri = z
  .string()
  .max(2048)
  .regex(new RegExp(REDIRECT_URI_PATTERN), REDIRECT_URI_MESSAGE)
  .refine(parsesAsUrl, URL_MESSAGE)
  .describe(
    'Redirect URI of the client: absolute https, or http on a loopback host; matched exactly by oauth/authorize and oauth/token.',
  );

export const OAuthClientSpec = z
  .strictObject({
    api_id: z.string().min(1).describe('API the client belongs to.'),
    client_id: ClientId.describe('OAuth client id.'),
    client_name: z.string().optional().describe('Display name of the client.'),
    description: z.string().optional().describe('Free-form description.'),
    policy_id: z.string().optional().describe('Policy (metadata.name) applied to tokens of this client.'),
    redirect_uri: z
      .string()
      .max(2048)
      .regex(new RegExp(`^$|${REDIRECT_URI_PATTERN}`), REDIRECT_URI_MESSAGE)
      .refine(parsesAsUrl, URL_MESSAGE)
      .optional()
      .describe(
        'Redirect URI of the client (absolute https, or http on a loopback host; empty: none, client_credentials only).',
      ),
    meta_data: FreeObject.optional().describe('Free-form metadata.'),
    secretRef: SecretRef.describe('Secret holding the client secret.'),
    dcr_registration: DcrRegistration.optional(),
  })
  .describe('An OAuth client of an API.');

export type OAuthClientSpecT = z.infer<typeof OAuthClientSpec>;
