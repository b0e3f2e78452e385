/**
 * The nesting bound of every JSON body gw parses (facade and OAuth bodies, stream payloads, admission
 * reviews, stream peers' answers), checked BEFORE the parse by one linear scan of the text: a 1 MB body
 * of 500,000 nested arrays is refused after 65 characters instead of being built (about 25 MB of heap
 * each) and then walked. The scan counts `[` and `{` outside JSON strings (a string's brackets and its
 * escaped quotes are skipped), so it costs one pass over the bytes and allocates nothing; brackets,
 * quotes and backslashes are ASCII and never occur inside a UTF-8 multi-byte sequence, so bytes and
 * characters give the same answer. docs/architecture.md, "Hostile input".
 */
import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from './char-codes.js';

export const MAX_JSON_DEPTH = 64;

/**
 * The nesting scan over bytes fed in pieces (a request body as its chunks arrive): the same answer as one
 * scan of the whole, with the state between pieces (depth, inside a string, a backslash ending the last
 * piece) kept here. One loop over a Uint8Array only: a loop reading both strings and bytes ran ~10×
 * slower on bytes (20 ms per MB against 1.5–2 ms), which held the event loop once per 1 MB stream body.
 */
export class JsonDepthScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private seen = 0;
  /** Bytes fed so far (up to the bracket past the bound, once found). */
  get bytesSeen(): number {
    return this.seen;
  }
  /** Offset (over all bytes fed) of the first bracket past the bound, once found; -1 until then. */
  pastAt = -1;

  constructor(private readonly maxDepth = MAX_JSON_DEPTH) {}

  /** Scans the next piece; the offset of the first bracket past the bound (over all pieces), or -1. */
  feed(bytes: Uint8Array): number {
    if (this.pastAt >= 0) return this.pastAt;
    const n = bytes.length;
    if (n === 0) return -1;
    const max = this.maxDepth;
    let depth = this.depth;
    let inString = this.inString;
    let i = 0;
    if (this.escaped) {
      this.escaped = false;
      i = 1;
    }
    for (; i < n; i++) {
      const c = bytes[i]!;
      if (inString) {
        if (c === BACKSLASH) {
          if (i + 1 >= n) this.escaped = true;
          i++;
        } else if (c === QUOTE) inString = false;
      } else if (c === QUOTE) inString = true;
      else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
        if (++depth > max) {
          this.pastAt = this.seen + i;
          return this.pastAt;
        }
      } else if ((c === CLOSE_ARRAY || c === CLOSE_OBJECT) && depth > 0) depth--;
    }
    this.depth = depth;
    this.inString = inString;
    this.seen += n;
    return -1;
  }
}

/**
 * The offset (character of a string, byte of bytes) of the first `[`/`{` that opens level maxDepth + 1
 * outside strings, or -1 when none does. Stops there. For text that is not JSON the answer is about its
 * brackets only.
 */
export function jsonNestingPastAt(text: string | Uint8Array, maxDepth = MAX_JSON_DEPTH): number {
  if (typeof text !== 'string') return new JsonDepthScanner(maxDepth).feed(text);
  let depth = 0;
  let inString = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return i;
    } else if ((c === CLOSE_ARRAY || c === CLOSE_OBJECT) && depth > 0) depth--;
  }
  return -1;
}

/** Whether `text` opens more than `maxDepth` arrays/objects inside one another (outside strings). */
export const jsonNestingExceeds = (text: string | Uint8Array, maxDepth = MAX_JSON_DEPTH): boolean =>
  jsonNestingPastAt(text, maxDepth) >= 0;

/** Thrown by parseJson for a body nested past the bound (its message is the reason, for a 400). */
export class JsonTooDeepError extends Error {
  override readonly name = 'JsonTooDeepError';
  constructor(
    readonly maxDepth: number,
    readonly offset: number,
  ) {
    super(`nested deeper than ${maxDepth} levels (at offset ${offset})`);
  }
}

/** JSON.parse behind the nesting bound: JsonTooDeepError past it, SyntaxError when malformed. */
export function parseJson(text: string | Uint8Array, maxDepth = MAX_JSON_DEPTH): unknown {
  const at = jsonNestingPastAt(text, maxDepth);
  if (at >= 0) throw new JsonTooDeepError(maxDepth, at);
  return JSON.parse(
    typeof text === 'string' ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8'),
  ) as unknown;
}
