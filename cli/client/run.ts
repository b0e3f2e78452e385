/** Runs a client command: JSON answer on stdout, one line on stderr and the exit code on failure. */
import type { Command } from 'commander';
import { ClientError, Exit, type ExitCode } from './exit-codes.js';
import { oneLine } from './http.js';

export interface OutputFlags {
  pretty?: boolean;
}

export function printJson(value: unknown, flags: OutputFlags): void {
  process.stdout.write(`${JSON.stringify(value, null, flags.pretty ? 2 : undefined)}\n`);
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
export function clientAction<A extends unknown[]>(fn: (...args: A) => Promise<ExitCode>): (...args: A) => Promise<void> {
  return async (...args: A): Promise<void> => {
    const cmd = args[args.length - 1] as Command;
    let code: ExitCode;
    try {
      code = await fn(...args);
    } catch (e) {
      const ce = e instanceof ClientError ? e : new ClientError(Exit.UNAVAILABLE, `unexpected: ${(e as Error).message}`);
      process.stderr.write(`${commandName(cmd)}: ${oneLine(ce.message)}\n`);
      code = ce.code;
    }
    process.exitCode = code;
  };
}
