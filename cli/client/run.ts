/** Runs a client command: JSON answer on stdout, one line on stderr and the exit code on failure. */
import type { Command } from 'commander';
import { readBody, type BodyFlags } from './body.js';
import { addConnectionOptions, resolveConnection, type ConnectionFlags } from './connection.js';
import { ClientError, Exit, type ExitCode } from './exit-codes.js';
import { callFacade, oneLine, type FacadeCall } from './http.js';

export interface OutputFlags {
  pretty?: boolean;
}

export function printJson(value: unknown, flags: OutputFlags): void {
  process.stdout.write(`${JSON.stringify(value, null, flags.pretty ? 2 : undefined)}\n`);
}

/**
 * The options of a `gw keys` / `gw oauth` command: --body and --body-file (help texts `body`), the
 * command's own options (`more`), --pretty, then the connection options with the credential it sends.
 */
export function clientOptions(
  cmd: Command,
  o: { body?: { json: string; file: string }; creds: { token?: boolean; secret?: boolean } },
  more?: (cmd: Command) => void,
): Command {
  if (o.body) cmd.option('--body <json>', o.body.json).option('--body-file <file>', o.body.file);
  more?.(cmd);
  cmd.option('--pretty', 'indent the JSON output');
  return addConnectionOptions(cmd, o.creds);
}

/**
 * The body of a plain client action: the connection, then the request body (`withBody`: --body /
 * --body-file, `{}` when neither), one call to the facade, its answer printed; exit 0.
 */
export async function callAndPrint(
  flags: ConnectionFlags & BodyFlags & OutputFlags,
  call: Omit<FacadeCall, 'body'>,
  withBody = false,
): Promise<ExitCode> {
  const conn = resolveConnection(flags);
  const body = withBody ? readBody(flags, {}) : undefined;
  printJson(await callFacade(conn, { ...call, body }), flags);
  return Exit.OK;
}

/** The full command name, e.g. "gw keys create", for the error line. */
function commandName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * Wraps an action: it returns the exit code (after printing); a ClientError prints one line on stderr;
 * anything unexpected is exit 5. process.exitCode (not exit()) so stdout is flushed to a pipe.
 */
export function clientAction<A extends unknown[]>(
  fn: (...args: A) => Promise<ExitCode>,
): (...args: A) => Promise<void> {
  return async (...args: A): Promise<void> => {
    const cmd = args[args.length - 1] as Command;
    let code: ExitCode;
    try {
      code = await fn(...args);
    } catch (e) {
      const ce =
        e instanceof ClientError ? e : new ClientError(Exit.UNAVAILABLE, `unexpected: ${(e as Error).message}`);
      process.stderr.write(`${commandName(cmd)}: ${oneLine(ce.message)}\n`);
      code = ce.code;
    }
    process.exitCode = code;
  };
}
