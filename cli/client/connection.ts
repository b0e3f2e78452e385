/** Where the facade is and which credentials to send: flags win over GW_FACADE_URL, GW_ACCESS_TOKEN, GW_SECRET. */
import { Option, type Command } from 'commander';
import { z } from 'zod';
import { ClientError, Exit } from './exit-codes.js';

export const DEFAULT_FACADE_URL = 'http://127.0.0.1:8081';
export const DEFAULT_TIMEOUT_S = 60;

export interface ConnectionFlags {
  url?: string;
  token?: string;
  secret?: string;
  timeout?: string;
}

export interface Connection {
  /** Origin plus an optional base path, without a trailing slash (for messages). */
  base: string;
  origin: string;
  /** Base path without a trailing slash ('' for the root). */
  basePath: string;
  token: string | undefined;
  secret: string | undefined;
  timeoutMs: number;
}

const parsedUrl = (u: string): URL | undefined => {
  try {
    return new URL(u);
  } catch {
    return undefined;
  }
};

const FacadeUrl = z
  .string()
  .trim()
  .pipe(z.url({ protocol: /^https?$/ }))
  .refine((u) => !parsedUrl(u)?.username && !parsedUrl(u)?.password, 'must not contain credentials')
  .refine((u) => !parsedUrl(u)?.search && !parsedUrl(u)?.hash, 'must not have a query or fragment');

const Timeout = z.coerce.number().positive().max(3600);

/** Adds --url, --token / --secret (only the ones the command uses) and --timeout. */
export function addConnectionOptions(cmd: Command, creds: { token?: boolean; secret?: boolean }): Command {
  cmd.addOption(new Option('--url <url>', `facade base URL (default ${DEFAULT_FACADE_URL})`).env('GW_FACADE_URL'));
  if (creds.token)
    cmd.addOption(
      new Option('--token <token>', 'bearer access token for /api/... (prefer the env var)').env('GW_ACCESS_TOKEN'),
    );
  if (creds.secret)
    cmd.addOption(
      new Option('--secret <secret>', 'X-Gw-Authorization secret for /gw/keys (prefer the env var)').env('GW_SECRET'),
    );
  cmd.addOption(
    new Option('--timeout <seconds>', `give up on the facade after this long (default ${DEFAULT_TIMEOUT_S})`).env(
      'GW_CLIENT_TIMEOUT',
    ),
  );
  return cmd;
}

export function resolveConnection(flags: ConnectionFlags): Connection {
  const url = FacadeUrl.safeParse(flags.url ?? DEFAULT_FACADE_URL);
  if (!url.success)
    throw new ClientError(Exit.USAGE, `--url / GW_FACADE_URL: ${url.error.issues[0]?.message ?? 'invalid'}`);
  const t = Timeout.safeParse(flags.timeout ?? DEFAULT_TIMEOUT_S);
  if (!t.success)
    throw new ClientError(Exit.USAGE, '--timeout / GW_CLIENT_TIMEOUT: must be a number of seconds > 0 and ≤ 3600');
  const u = new URL(url.data);
  const basePath = u.pathname.replace(/\/+$/, '');
  return {
    base: `${u.origin}${basePath}`,
    origin: u.origin,
    basePath,
    token: credential(flags.token, '--token / GW_ACCESS_TOKEN'),
    secret: credential(flags.secret, '--secret / GW_SECRET'),
    timeoutMs: Math.round(t.data * 1000),
  };
}

/**
 * A credential as a header value: surrounding whitespace dropped (a value read from a file or a Secret
 * often ends in a newline; the facade trims its own configured values the same way), and one that still
 * holds a control character refused as a usage error naming the variable — never the value (inside undici
 * it would fail as "facade unreachable", exit 5: retry later).
 */
function credential(value: string | undefined, what: string): string | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(v))
    throw new ClientError(Exit.USAGE, `${what}: holds a control character (a header cannot carry it)`);
  return v;
}
