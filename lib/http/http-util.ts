/** JSON in and out: the one JSON writer (`sendJson`); for the facade bounded body reading, content-type checks, error bodies. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { formatZodError } from '../errors.js';
import { JsonTooDeepError, parseJson } from '../json-depth.js';
import { formatShapeProblem, jsonShapeProblem } from '../json-shape.js';

/** Largest request body the facade reads (docs/contract.md#management-endpoints); the CLI's client commands check it before sending. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** The message of the facade's 404 for a path it has no route for (the CLI tells it from an unknown key). */
export const NO_SUCH_ROUTE = 'no such route';

/** A C0 control character or DEL (U+0000–U+001F, U+007F); `ch` is one character (code point). */
export function isControlChar(ch: string): boolean {
  const c = ch.codePointAt(0)!;
  return c < 0x20 || c === 0x7f;
}

/** Whether `s` holds a control character (header/log injection; a URL parser silently drops CR/LF/TAB). */
export function hasControlChar(s: string): boolean {
  return [...s].some(isControlChar);
}

/**
 * The first character of `s` that displays as something other than itself, as `U+XXXX`, or undefined:
 * a control character (C0, DEL, C1: Unicode Cc), a format character (Cf: the bidi controls U+061C,
 * U+200E/F, U+202A–E, U+2066–9 that reorder what a log line or a console shows, zero-width characters,
 * the BOM) or a line/paragraph separator (U+2028/9, a line break to JavaScript and many log viewers).
 * Identifiers an operator reads in logs and listings are refused with it (docs/facade.md, keyID).
 */
export function invisibleCharIn(s: string): string | undefined {
  const m = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.exec(s);
  return m ? `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}` : undefined;
}

/** Thrown anywhere in a handler; answered as {"status":"error","message":...}. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** What a JSON answer says of itself after the caller's headers: its content type, and whether no cache may keep it. */
export interface JsonKind {
  readonly contentType: string;
  readonly noStore: boolean;
}
/** The facade's answers (docs/contract.md#management-endpoints): UTF-8 named, never cached. */
export const FACADE_JSON: JsonKind = { contentType: 'application/json; charset=utf-8', noStore: true };
/** The gateway's own answers (docs/contract.md#responses) and the ops listeners': `application/json`, nothing more. */
export const PLAIN_JSON: JsonKind = { contentType: 'application/json', noStore: false };

/**
 * The one JSON writer of every listener: `body` serialised with its length, after the caller's `headers`
 * (which cannot override the content type or length). `kind` says how the answer labels itself.
 */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  kind: JsonKind = FACADE_JSON,
): void {
  const text = JSON.stringify(body);
  const head: Record<string, string | number> = {
    ...headers,
    'content-type': kind.contentType,
    'content-length': Buffer.byteLength(text),
  };
  if (kind.noStore) head['cache-control'] = 'no-store';
  res.writeHead(status, head);
  res.end(text);
}

/** The facade's error body (docs/contract.md#management-endpoints). */
export const errorBody = (_status: number, message: string): { status: 'error'; message: string } => ({
  status: 'error',
  message,
});

export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, errorBody(status, message), headers);
}

const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;.*)?$/i;

export function isJsonContentType(value: string | undefined): boolean {
  return value !== undefined && JSON_TYPE.test(value.trim());
}

/**
 * Reads and parses a JSON body: 415 unless the content type is JSON, 413 past MAX_BODY_BYTES (the
 * declared length is checked first; a streamed body stops being buffered once over), 400 when malformed
 * or nested deeper than MAX_JSON_DEPTH (refused by a scan before the parse: lib/json-depth.ts).
 */
export async function readJson(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<unknown> {
  if (!isJsonContentType(req.headers['content-type'])) {
    throw new HttpError(415, 'Content-Type must be application/json');
  }
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > limit) throw new HttpError(413, `request body larger than ${limit} bytes`, { connection: 'close' });
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > limit) {
        req.off('data', onData);
        req.pause();
        reject(new HttpError(413, `request body larger than ${limit} bytes`, { connection: 'close' }));
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.once('end', () => resolve());
    // the client gone mid-upload (ECONNRESET, "aborted"): a client error, never the facade's 500
    req.once('error', () => reject(new HttpError(400, 'request body incomplete (connection closed)')));
    req.once('close', () => {
      if (!req.complete) reject(new HttpError(400, 'request body incomplete (connection closed)'));
    });
  });
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw new HttpError(400, 'malformed JSON: empty body');
  let body: unknown;
  try {
    body = parseJson(text);
  } catch (e) {
    if (e instanceof JsonTooDeepError) throw new HttpError(400, `(root): ${e.message}`);
    throw new HttpError(400, `malformed JSON: ${(e as Error).message}`);
  }
  const problem = jsonShapeProblem(body);
  if (problem) throw new HttpError(400, formatShapeProblem(problem));
  return body;
}

/** Validates with a zod schema; 400 naming the field(s) otherwise. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, prefix: string[] = []): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new HttpError(400, formatZodError(r.error, prefix));
  return r.data;
}

/** The body must be a JSON object (not an array, string, null...). */
export function requireObject(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new HttpError(400, '(root): must be a JSON object');
  return value as Record<string, unknown>;
}
