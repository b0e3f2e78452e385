/**
 * `gw oauth create|list|get|delete`: OAuth clients of an API through the facade (bearer token);
 * `gw oauth authorize|introspect` (the secret) in oauth-flow.ts.
 */
import { Command } from 'commander';
import type { BodyFlags } from './body.js';
import type { ConnectionFlags } from './connection.js';
import { seg } from './http.js';
import { addOAuthFlowCommands } from './oauth-flow.js';
import { callAndPrint, clientAction, clientOptions, type OutputFlags } from './run.js';

type OAuthFlags = ConnectionFlags & BodyFlags & OutputFlags;

const BODY = {
  json: 'the client as JSON (client_id, secret, policy_id, redirect_uri, meta_data...); "-" reads stdin',
  file: 'read the client from a file; "-" reads stdin',
};

function common(cmd: Command, body = false): Command {
  return clientOptions(cmd, { body: body ? BODY : undefined, creds: { token: true } });
}

export function oauthCommand(): Command {
  const oauth = new Command('oauth').description(
    'OAuth clients of an API (/api/apis/oauth), codes and introspection (/gw/oauth) through the facade',
  );

  common(
    oauth
      .command('create')
      .description(
        'Create a client (POST /api/apis/oauth/{apiId}); client_id and secret generated when absent. Prints the client, secret included',
      )
      .argument('<apiId>'),
    true,
  ).action(
    clientAction(async (apiId: string, flags: OAuthFlags) =>
      callAndPrint(flags, { method: 'POST', path: `/api/apis/oauth/${seg(apiId)}`, credential: 'bearer' }, true),
    ),
  );

  common(
    oauth
      .command('list')
      .description('Clients of an API, secrets omitted (GET /api/apis/oauth/{apiId})')
      .argument('<apiId>'),
  ).action(
    clientAction(async (apiId: string, flags: OAuthFlags) =>
      callAndPrint(flags, { method: 'GET', path: `/api/apis/oauth/${seg(apiId)}`, credential: 'bearer' }),
    ),
  );

  common(
    oauth.command('get').description('One client, secret included').argument('<apiId>').argument('<clientId>'),
  ).action(
    clientAction(async (apiId: string, clientId: string, flags: OAuthFlags) =>
      callAndPrint(flags, {
        method: 'GET',
        path: `/api/apis/oauth/${seg(apiId)}/${seg(clientId)}`,
        credential: 'bearer',
      }),
    ),
  );

  common(
    oauth.command('delete').description('Delete a client and its secret').argument('<apiId>').argument('<clientId>'),
  ).action(
    clientAction(async (apiId: string, clientId: string, flags: OAuthFlags) =>
      callAndPrint(flags, {
        method: 'DELETE',
        path: `/api/apis/oauth/${seg(apiId)}/${seg(clientId)}`,
        credential: 'bearer',
      }),
    ),
  );
  addOAuthFlowCommands(oauth);
  return oauth;
}
