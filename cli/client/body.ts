/** The request body of a client command: --body JSON, --body-file FILE, or `-` (either flag) for stdin. */
import { z } from 'zod';
// The facade's own limit (one home): a bigger body would only be refused with 413.
import { MAX_BODY_BYTES } from '../../lib/http/http-util.js';
import { ClientError, Exit } from './exit-codes.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

export interface BodyFlags {
  body?: string;
  bodyFile?: string;
}

/** The facade's bodies are JSON objects; anything else is refused here, before a request is sent. */
const JsonObject = z.record(z.string(), z.unknown());

export function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch (e) {
    throw new ClientError(Exit.USAGE, `stdin: ${(e as Error).message}`);
  }
}

function readText(flags: BodyFlags): { text: string; from: string } | undefined {
  if (flags.body !== undefined && flags.bodyFile !== undefined)
    throw new ClientError(Exit.USAGE, '--body and --body-file: give one of them');
  if (flags.body === '-' || flags.bodyFile === '-') return { text: readStdin(), from: 'stdin' };
  if (flags.body !== undefined) return { text: flags.body, from: '--body' };
  if (flags.bodyFile !== undefined) {
    try {
      return { text: readFileSync(flags.bodyFile, 'utf8'), from: `--body-file ${flags.bodyFile}` };
    } catch (e) {
      throw new ClientError(
        Exit.USAGE,
        `--body-file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}: ${flags.bodyFile}`,
      );
    }
  }
  return undefined;
}

/** The parsed body object, or `fallback` when no body was given. */
export function readBody(
  flags: BodyFlags,
  fallback: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  const got = readText(flags);
  if (!got) return fallback;
  if (Buffer.byteLength(got.text) > MAX_BODY_BYTES)
    throw new ClientError(Exit.USAGE, `${got.from}: larger than ${MAX_BODY_BYTES} bytes (the facade's limit)`);
  let value: unknown;
  try {
    value = JSON.parse(got.text) as unknown;
  } catch (e) {
    throw new ClientError(Exit.USAGE, `${got.from}: invalid JSON: ${(e as Error).message}`);
  }
  const r = JsonObject.safeParse(value);
  if (!r.success || Array.isArray(value)) throw new ClientError(Exit.USAGE, `${got.from}: must be a JSON object`);
  return r.data;
}
