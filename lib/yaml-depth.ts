/**
 * The nesting bound of every YAML manifest gw reads (docs/architecture.md, "Hostile input"), checked
 * BEFORE the parse: the YAML parsers and what turns their trees into values recurse once per level, so a
 * 1 MiB file of 400,000 nested `[` overflowed their stack after 10–25 s and 300–600 MB of heap. The bound
 * is lib/json-depth.ts's (64 collections inside one another), which no field of gw's resources comes near
 * and which the parsed documents are held to anyway (lib/json-shape.ts).
 *
 * Two passes, the second only when the first cannot clear the text:
 * - an upper bound in one linear pass that allocates nothing: every `[` and `{` of the text (any of them
 *   may open a flow collection), plus two block collections per column a block collection can start at
 *   (nested block collections start at a greater column, or a sequence at its parent mapping's column;
 *   a column is bounded by a line's indentation and its leading `- `/`? `/`: ` indicators, anchors,
 *   tags and `--- `). A manifest as
 *   written by hand or by a tool clears it (one of the 10,000-file benchmark's: 20);
 * - otherwise the `yaml` package's lexer and CST parser, which keep their open collections on an explicit
 *   stack (no recursion), fed one token at a time and stopped at the first collection past the bound: the
 *   exact nesting, at a cost of about 2 ms per 500-byte manifest, and tens of milliseconds for a hostile 1 MiB file
 *   (the scan ends at the 65th level).
 * Nesting the text does not show (an alias chain) is left to the parse, whose stack overflow is caught.
 */
import { Lexer, Parser } from 'yaml';
import { MAX_JSON_DEPTH } from './json-depth.js';
import { AMPERSAND, BANG, COLON, DASH, NL, OPEN_ARRAY, OPEN_OBJECT, QUESTION, SPACE, TAB } from './char-codes.js';

/**
 * A manifest's bound: a resource body at the JSON bound (what the facade accepts) sits inside its
 * document's mapping, and a JSON manifest may hold its documents in an array: two levels more.
 */
export const MAX_MANIFEST_DEPTH = MAX_JSON_DEPTH + 2;
export const MAX_YAML_DEPTH = MAX_MANIFEST_DEPTH;

/** Where the first collection past the bound opens: its document (from 0), line and column (from 1). */
export interface YamlTooDeep {
  document: number;
  line: number;
  column: number;
}

/** An upper bound of the text's collection nesting (see above), from one pass over its characters. */
export function yamlNestingBound(text: string): number {
  let opens = 0;
  let maxColumn = 0;
  let lineStart = true;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    let c = text.charCodeAt(i);
    if (lineStart) {
      // the column after the line's indentation and its leading indicators (`- - ? x`: each one a level)
      const start = i;
      for (;;) {
        while (i < n && (c === SPACE || c === TAB)) c = text.charCodeAt(++i);
        if (c === AMPERSAND || c === BANG) {
          // an anchor or a tag before the node: skipped to the space after it
          while (i < n && c !== SPACE && c !== TAB && c !== NL) c = text.charCodeAt(++i);
          continue;
        }
        const marker = i === start && (text.startsWith('--- ', i) || text.startsWith('---\t', i));
        if (c !== DASH && c !== QUESTION && c !== COLON && !marker) break;
        const width = marker ? 3 : 1;
        const next = i + width < n ? text.charCodeAt(i + width) : NL;
        if (next !== SPACE && next !== TAB && next !== NL) break;
        i += width;
        c = text.charCodeAt(i);
      }
      // a line of spaces only (or ending in an indicator) opens nothing at its end column
      if (i < n && c !== NL && i - start > maxColumn) maxColumn = i - start;
      lineStart = false;
      if (i >= n) break;
    }
    if (c === NL) lineStart = true;
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) opens++;
  }
  return opens + 2 * (maxColumn + 1);
}

/** The first place the text nests collections deeper than maxDepth, or undefined when it does not. */
export function yamlNestingPast(text: string, maxDepth = MAX_YAML_DEPTH): YamlTooDeep | undefined {
  if (yamlNestingBound(text) <= maxDepth) return undefined;
  const parser = new Parser();
  let document = 0;
  // the parser's stack: the document, its open collections, and the node being read
  const limit = maxDepth + 2;
  for (const token of new Lexer().lex(text)) {
    for (const t of parser.next(token)) if (t.type === 'document') document++;
    if (parser.stack.length > limit) {
      const at = Math.min(parser.offset, text.length);
      const lineStart = text.lastIndexOf('\n', at - 1) + 1;
      let line = 1;
      for (let i = text.indexOf('\n'); i >= 0 && i < lineStart; i = text.indexOf('\n', i + 1)) line++;
      return { document, line, column: at - lineStart + 1 };
    }
  }
  return undefined;
}
