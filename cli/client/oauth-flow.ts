/**
 * `gw oauth authorize|introspect`: the facade's OAuth flow routes (X-Gw-Authorization): a code for an
 * authorization the user consented to (POST /gw/oauth/authorize-client), and RFC 7662 introspection of a
 * token (POST /gw/oauth/introspect). Same output and exit codes as `gw keys`.
 */
import type { Command } from 'commander';
import { readBody, readStdin, type BodyFlags } from './body.js';
import { resolveConnection, type ConnectionFlags } from './connection.js';
import { ClientError, Exit, type ExitCode } from './exit-codes.js';
import { callFacade } from './http.js';
import { clientAction, clientOptions, printJson, type OutputFlags } from './run.js';

type AuthorizeFlags = ConnectionFlags &
  BodyFlags &
  OutputFlags & { redirectUri?: string; state?: string; codeChallenge?: string; codeChallengeMethod?: string };
type IntrospectFlags = ConnectionFlags & OutputFlags;

async function post(
  flags: ConnectionFlags & OutputFlags,
  path: string,
  body: Record<string, unknown>,
): Promise<ExitCode> {
  const conn = resolveConnection(flags);
  printJson(await callFacade(conn, { method: 'POST', path, credential: 'secret', body }), flags);
  return Exit.OK;
}

/** The authorize-client body: --body (or --body-file) first, then the arguments and flags over it. */
export function authorizeBody(apiId: string, clientId: string, flags: AuthorizeFlags): Record<string, unknown> {
  const body: Record<string, unknown> = { ...readBody(flags, {}), api_id: apiId, client_id: clientId };
  body.response_type ??= 'code';
  if (flags.redirectUri !== undefined) body.redirect_uri = flags.redirectUri;
  if (flags.state !== undefined) body.state = flags.state;
  if (flags.codeChallenge !== undefined) {
    body.code_challenge = flags.codeChallenge;
    body.code_challenge_method = flags.codeChallengeMethod ?? 'S256';
  } else if (flags.codeChallengeMethod !== undefined) body.code_challenge_method = flags.codeChallengeMethod;
  if (typeof body.redirect_uri !== 'string' || body.redirect_uri === '')
    throw new ClientError(Exit.USAGE, 'a redirect URI is needed: --redirect-uri URI (or redirect_uri in --body)');
  return body;
}

/** The token to introspect: the argument, or stdin for "-" (keeps it out of the process list), trimmed. */
export function introspectToken(arg: string): string {
  const token = (arg === '-' ? readStdin() : arg).trim();
  if (token === '') throw new ClientError(Exit.USAGE, arg === '-' ? 'stdin: no token' : 'the token is empty');
  return token;
}

export function addOAuthFlowCommands(oauth: Command): void {
  clientOptions(
    oauth
      .command('authorize')
      .description(
        "A code for an authorization the user consented to (POST /gw/oauth/authorize-client): for the API owner's login page. Prints {code, redirect_to}",
      )
      .argument('<apiId>')
      .argument('<clientId>'),
    {
      body: {
        json: 'the request as JSON ({redirect_uri, state, code_challenge, ...}); the flags win; "-" reads stdin',
        file: 'read the request from a file; "-" reads stdin',
      },
      creds: { secret: true },
    },
    (c) =>
      c
        .option('--redirect-uri <uri>', "the client's registered redirect URI (exact match)")
        .option('--state <state>', 'the state of the authorization request, returned in redirect_to')
        .option('--code-challenge <challenge>', 'PKCE code_challenge of the authorization request')
        .option('--code-challenge-method <method>', 'PKCE method (only S256; the default with --code-challenge)'),
  ).action(
    clientAction(async (apiId: string, clientId: string, flags: AuthorizeFlags) =>
      post(flags, '/gw/oauth/authorize-client', authorizeBody(apiId, clientId, flags)),
    ),
  );

  clientOptions(
    oauth
      .command('introspect')
      .description(
        'Whether a token is active, with its client, API and lifetime (POST /gw/oauth/introspect, RFC 7662). Prints {active, ...}',
      )
      .argument('<token>', 'the access or refresh token; "-" reads it from stdin (keeps it out of the process list)')
      // A token may begin with "-" (base64url): it is the argument, not an unknown option echoed to stderr.
      .allowUnknownOption(),
    { creds: { secret: true } },
  ).action(
    clientAction(async (token: string, flags: IntrospectFlags) =>
      post(flags, '/gw/oauth/introspect', { token: introspectToken(token) }),
    ),
  );
}
