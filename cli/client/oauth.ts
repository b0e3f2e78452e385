/** `gw oauth create|list|get|delete`: OAuth clients of an API through the facade (bearer token). */
import { Command } from 'commander';
import { readBody, type BodyFlags } from './body.js';
import { addConnectionOptions, resolveConnection, type ConnectionFlags } from './connection.js';
import { Exit } from './exit-codes.js';
import { callFacade, seg } from './http.js';
import { clientAction, printJson, type OutputFlags } from './run.js';

type OAuthFlags = ConnectionFlags & BodyFlags & OutputFlags;

function common(cmd: Command, body = false): Command {
  if (body) {
    cmd
      .option('--body <json>', 'the client as JSON (client_id, secret, policy_id, redirect_uri, meta_data...); "-" reads stdin')
      .option('--body-file <file>', 'read the client from a file; "-" reads stdin');
  }
  cmd.option('--pretty', 'indent the JSON output');
  return addConnectionOptions(cmd, { token: true });
}

export function oauthCommand(): Command {
  const oauth = new Command('oauth').description('OAuth clients of an API through the facade (/api/apis/oauth)');

  common(
    oauth
      .command('create')
      .description('Create a client (POST /api/apis/oauth/{apiId}); client_id and secret generated when absent. Prints the client, secret included')
      .argument('<apiId>'),
    true,
  ).action(
    clientAction(async (apiId: string, flags: OAuthFlags) => {
      const conn = resolveConnection(flags);
      const body = readBody(flags, {});
      printJson(await callFacade(conn, { method: 'POST', path: `/api/apis/oauth/${seg(apiId)}`, credential: 'bearer', body }), flags);
      return Exit.OK;
    }),
  );

  common(oauth.command('list').description('Clients of an API, secrets omitted (GET /api/apis/oauth/{apiId})').argument('<apiId>')).action(
    clientAction(async (apiId: string, flags: OAuthFlags) => {
      const conn = resolveConnection(flags);
      printJson(await callFacade(conn, { method: 'GET', path: `/api/apis/oauth/${seg(apiId)}`, credential: 'bearer' }), flags);
      return Exit.OK;
    }),
  );

  common(oauth.command('get').description('One client, secret included').argument('<apiId>').argument('<clientId>')).action(
    clientAction(async (apiId: string, clientId: string, flags: OAuthFlags) => {
      const conn = resolveConnection(flags);
      printJson(await callFacade(conn, { method: 'GET', path: `/api/apis/oauth/${seg(apiId)}/${seg(clientId)}`, credential: 'bearer' }), flags);
      return Exit.OK;
    }),
  );

  common(oauth.command('delete').description('Delete a client and its secret').argument('<apiId>').argument('<clientId>')).action(
    clientAction(async (apiId: string, clientId: string, flags: OAuthFlags) => {
      const conn = resolveConnection(flags);
      printJson(await callFacade(conn, { method: 'DELETE', path: `/api/apis/oauth/${seg(apiId)}/${seg(clientId)}`, credential: 'bearer' }), flags);
      return Exit.OK;
    }),
  );
  return oauth;
}
