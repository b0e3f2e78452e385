/** `gw keys create|update|get|delete|list`: /gw/keys of the facade (X-Gw-Authorization). */
import { Command } from 'commander';
import type { BodyFlags } from './body.js';
import type { ConnectionFlags } from './connection.js';
import { ClientError, Exit, type ExitCode } from './exit-codes.js';
import { seg } from './http.js';
import { sha256hex } from '../../lib/hash.js';
import { callAndPrint, clientAction, clientOptions, printJson, type OutputFlags } from './run.js';
const { randomBytes } = process.getBuiltinModule('node:crypto');

type KeyFlags = ConnectionFlags & BodyFlags & OutputFlags & { hashed?: boolean; suppressReset?: boolean };

function query(flags: KeyFlags, write: boolean): string {
  const q = new URLSearchParams();
  if (write && flags.suppressReset) q.set('suppress_reset', '1');
  if (flags.hashed) q.set('hashed', 'true');
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * A new random key: 32 bytes (256 bits), base64url, never starting with '-' (one in 64 would, and
 * `gw keys delete "$key"` would then read it as an option), so such a draw is drawn again.
 */
export function generateKey(): string {
  for (;;) {
    const key = randomBytes(32).toString('base64url');
    if (!key.startsWith('-')) return key;
  }
}

function common(cmd: Command, opts: { body?: boolean; write?: boolean; hashed?: boolean }): Command {
  const body = opts.body
    ? {
        json: 'the session as JSON (the key body of POST /gw/keys); "-" reads stdin',
        file: 'read the session from a file; "-" reads stdin',
      }
    : undefined;
  return clientOptions(cmd, { body, creds: { secret: true } }, (c) => {
    if (opts.write) c.option('--suppress-reset', 'keep the live quota (suppress_reset=1)');
    if (opts.hashed) c.option('--hashed', 'the key id already is the SHA-256 hex of the key (hashed=true)');
  });
}

/** One key's call (`/gw/keys/{keyID}`): a write (POST, PUT) sends the session body and its quota flag. */
function keyCall(method: 'GET' | 'POST' | 'PUT' | 'DELETE', keyID: string, flags: KeyFlags): Promise<ExitCode> {
  const write = method === 'POST' || method === 'PUT';
  return callAndPrint(
    flags,
    { method, path: `/gw/keys/${seg(keyID)}${query(flags, write)}`, credential: 'secret' },
    write,
  );
}

export function keysCommand(): Command {
  const keys = new Command('keys').description('Create, read and delete access keys through the facade (/gw/keys)');

  common(
    keys
      .command('create')
      .description(
        'Create or import a key (POST /gw/keys/{keyID}); a random 256-bit key when KEY_ID is omitted. Prints {key, key_hash, action, status}',
      )
      .argument('[keyID]', 'the key (or its hash with --hashed)')
      // An imported key may begin with "-": it is the argument, not an unknown option echoed to stderr.
      .allowUnknownOption(),
    { body: true, write: true, hashed: true },
  ).action(
    clientAction(async (keyID: string | undefined, flags: KeyFlags) => {
      if (keyID === undefined && flags.hashed) return usage('--hashed needs a KEY_ID (the hash)');
      const key = keyID ?? generateKey();
      try {
        return await keyCall('POST', key, flags);
      } catch (e) {
        // Written but not Ready (exit 9): the AccessKey exists, so the key is printed all the same —
        // a generated one would otherwise be lost, and each repeat would leave another AccessKey whose
        // key nobody received. Repeating with this key (`gw keys create "$key"`) writes the same one.
        if (e instanceof ClientError && e.code === Exit.NOT_READY)
          printJson(
            flags.hashed
              ? { key_hash: key, status: 'not_ready' }
              : { key, key_hash: sha256hex(key), status: 'not_ready' },
            flags,
          );
        throw e;
      }
    }),
  );

  common(
    keys
      .command('update')
      .description('Replace the session of an existing key (PUT /gw/keys/{keyID})')
      .argument('<keyID>')
      .allowUnknownOption(),
    { body: true, write: true, hashed: true },
  ).action(clientAction(async (keyID: string, flags: KeyFlags) => keyCall('PUT', keyID, flags)));

  common(
    keys
      .command('get')
      .description('The session, with live quota_remaining/quota_renews (GET /gw/keys/{keyID})')
      .argument('<keyID>')
      .allowUnknownOption(),
    {
      hashed: true,
    },
  ).action(clientAction(async (keyID: string, flags: KeyFlags) => keyCall('GET', keyID, flags)));

  common(
    keys
      .command('delete')
      .description('Delete a key (DELETE /gw/keys/{keyID})')
      .argument('<keyID>')
      .allowUnknownOption(),
    {
      hashed: true,
    },
  ).action(clientAction(async (keyID: string, flags: KeyFlags) => keyCall('DELETE', keyID, flags)));

  common(keys.command('list').description('SHA-256 hashes of every key (GET /gw/keys)'), {}).action(
    clientAction(async (flags: KeyFlags) =>
      callAndPrint(flags, { method: 'GET', path: '/gw/keys', credential: 'secret' }),
    ),
  );
  return keys;
}

function usage(message: string): never {
  throw new ClientError(Exit.USAGE, message);
}
