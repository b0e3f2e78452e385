/**
 * A fast reader for the plain subset of YAML that hand-written and generated manifests mostly use: block
 * mappings and block sequences (spaces only; `- x`, `- key: v` items, dashes indented or at their key's
 * column) whose values are one-line scalars, one-line flow mappings or flow sequences of scalars,
 * documents separated by `---` lines, full-line comments. It returns exactly what js-yaml's loadAll with
 * the core schema returns for such a text (scalars are typed by that schema's own resolver), or undefined
 * for anything outside the subset — the caller then uses the full parser, which also reports the errors.
 * Several times faster than a general parser, and it allocates little besides the result.
 */
import { CORE_SCHEMA } from 'js-yaml';

type Json = string | number | boolean | null | Json[] | { [k: string]: Json };
type Mapping = { [k: string]: Json };

/** Returned from inside the parse when the text leaves the subset. */
const OUT = Symbol('outside the subset');

/** ASCII printable and newline only (no tab, no CR, no control or non-ASCII character). */
const PLAIN_TEXT = /^[\n\x20-\x7e]*$/;
/** `key:` then nothing, or one or more spaces and a value (no trailing space: checked apart). */
const LINE = /^( *)([A-Za-z_][A-Za-z0-9_./-]*):(?: +(.*))?$/;
/**
 * A plain scalar in block context: safe first character, no `: `, no `#`, no trailing space or colon;
 * flow indicators after the first character are text there (`/users/{id}`, `/orders/[0-9]+`).
 */
const BLOCK_PLAIN = /^(?:[A-Za-z0-9_./+~]|-[0-9.])[A-Za-z0-9 _./+:@=~,*{}[\]-]*$/;
/** A plain scalar inside a flow collection: no spaces, colons or flow indicators. */
const FLOW_PLAIN = /^(?:[A-Za-z0-9_./+~]|-[0-9.])[A-Za-z0-9_./+@=~-]*$/;
const FLOW_KEY = /^[A-Za-z_][A-Za-z0-9_./-]*$/;

/** Keys already checked to be strings under the core schema (a few distinct keys recur in every document). */
const stringKeys = new Set<string>();

function keyOf(key: string): string | typeof OUT {
  if (stringKeys.has(key)) return key;
  // `true:` or `null:` keys are typed by YAML; `__proto__` needs the full parser's care; long keys are errors
  if (key === '__proto__' || key.length > 1000 || typeof CORE_SCHEMA.resolveImplicitScalarTag(key).value !== 'string')
    return OUT;
  if (stringKeys.size < 10_000) stringKeys.add(key);
  return key;
}

function plain(s: string, flow: boolean): Json | typeof OUT {
  if (!(flow ? FLOW_PLAIN : BLOCK_PLAIN).test(s)) return OUT;
  if (s.endsWith(' ') || s.endsWith(':') || s.includes(': ')) return OUT;
  const c = s.charCodeAt(0);
  // a value starting with a letter other than n/N/t/T/f/F is a string under the core schema (no shortcut
  // for the others: null, booleans and numbers are the schema's to decide)
  if (((c >= 97 && c <= 122) || (c >= 65 && c <= 90)) && !'nNtTfF'.includes(s[0]!)) return s;
  const v: unknown = CORE_SCHEMA.resolveImplicitScalarTag(s).value;
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || v === null ? v : OUT;
}

/** A quoted scalar without escapes (`'…'` without `'` inside, `"…"` without `"` or `\`), or OUT. */
function quoted(s: string): string | typeof OUT {
  const q = s[0];
  if (s.length < 2 || s[s.length - 1] !== q) return OUT;
  const inner = s.slice(1, -1);
  if (q === "'" ? inner.includes("'") : inner.includes('"') || inner.includes('\\')) return OUT;
  return inner;
}

function scalar(s: string, flow: boolean): Json | typeof OUT {
  const c = s[0];
  return c === "'" || c === '"' ? quoted(s) : plain(s, flow);
}

/** The items of a one-line flow collection's inside (`a, b` or `k: v, k: v`), split at commas outside quotes. */
function flowItems(inner: string): string[] | typeof OUT {
  const items: string[] = [];
  let start = 0;
  let quote = '';
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!;
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === "'" || c === '"') quote = c;
    else if (c === ',') {
      items.push(inner.slice(start, i).trim());
      start = i + 1;
    } else if (c === '[' || c === ']' || c === '{' || c === '}' || c === '#') return OUT;
  }
  if (quote) return OUT;
  items.push(inner.slice(start).trim());
  return items;
}

function flowMapping(s: string): Mapping | typeof OUT {
  const out: Mapping = {};
  const inner = s.slice(1, -1).trim();
  if (!inner) return out;
  const items = flowItems(inner);
  if (items === OUT) return OUT;
  for (const item of items) {
    const colon = item.indexOf(': ');
    if (colon <= 0) return OUT;
    const name = item.slice(0, colon);
    const key = FLOW_KEY.test(name) ? keyOf(name) : OUT;
    if (key === OUT || Object.hasOwn(out, key)) return OUT;
    const v = scalar(item.slice(colon + 2).trimStart(), true);
    if (v === OUT) return OUT;
    out[key] = v;
  }
  return out;
}

function flowSequence(s: string): Json[] | typeof OUT {
  const inner = s.slice(1, -1).trim();
  if (!inner) return [];
  const items = flowItems(inner);
  if (items === OUT) return OUT;
  const out: Json[] = [];
  for (const item of items) {
    const v = scalar(item, true);
    if (v === OUT) return OUT;
    out.push(v);
  }
  return out;
}

function value(s: string): Json | typeof OUT {
  const c = s[0];
  if (c === '{') return s[s.length - 1] === '}' ? flowMapping(s) : OUT;
  if (c === '[') return s[s.length - 1] === ']' ? flowSequence(s) : OUT;
  return scalar(s, false);
}

/** A block sequence entry: `- ` and its content (`- x`, `- key: v`, `- key:`), or `-` alone (outside the subset). */
const ITEM = /^( *)- +(.*)$/;

/** An open block collection: a mapping (`indent`: its keys' column) or a sequence (`indent`: its dashes' column). */
type Frame = { seq: false; indent: number; map: Mapping } | { seq: true; indent: number; list: Json[] };

/** The documents of `text`, or undefined when it is not entirely in the subset (the full parser decides). */
export function simpleYamlDocuments(text: string): unknown[] | undefined {
  if (!PLAIN_TEXT.test(text)) return undefined;
  const docs: Mapping[] = [];
  let root: Mapping | undefined;
  /** The open collections, innermost last. */
  const stack: Frame[] = [];
  /** A key with no value on its line: a mapping (keys indented more) or a sequence (dashes not less) follows. */
  let pending: { indent: number; map: Mapping; key: string } | undefined;
  let start = 0;
  let first = true;

  /** `key: value` or `key:` at column `indent` into the mapping on top; false when outside the subset. */
  const keyLine = (indent: number, name: string, raw: string | undefined): boolean => {
    const key = keyOf(name);
    if (key === OUT) return false;
    const top = stack[stack.length - 1];
    if (!top || top.seq || top.indent !== indent) return false;
    const into = top.map;
    if (Object.hasOwn(into, key)) return false; // a duplicate key is an error
    if (raw === undefined) {
      pending = { indent, map: into, key };
      return true;
    }
    const v = value(raw);
    if (v === OUT) return false;
    into[key] = v;
    return true;
  };

  while (start <= text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    const c = line.charCodeAt(0);
    if (line === '---') {
      if (pending) return undefined;
      if (root) docs.push(root);
      else if (!first) return undefined; // an empty document: js-yaml's own rules decide
      root = undefined;
      first = false;
      continue;
    }
    first = false;
    if (line.length === 0 || c === 35 /* # */) continue;
    if (line.endsWith(' ')) {
      if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
      return undefined;
    }
    const m = LINE.exec(line);
    const item = m ? undefined : ITEM.exec(line);
    if (!m && !item) {
      if (line.trimStart().startsWith('#')) continue;
      return undefined;
    }
    const indent = (m ?? item)![1]!.length;
    if (!root) {
      if (indent !== 0 || !m) return undefined;
      root = {};
      stack.length = 0;
      stack.push({ seq: false, indent: 0, map: root });
    }
    if (m) {
      if (pending) {
        if (indent <= pending.indent) return undefined; // `key:` alone is null: left to the full parser
        const child: Mapping = {};
        pending.map[pending.key] = child;
        stack.push({ seq: false, indent, map: child });
        pending = undefined;
      }
      // a key closes the sequences at its column or right of it, and the mappings right of it
      while (stack.length) {
        const top = stack[stack.length - 1]!;
        if (top.seq ? top.indent < indent : top.indent <= indent) break;
        stack.pop();
      }
      if (!keyLine(indent, m[2]!, m[3])) return undefined;
      continue;
    }
    if (pending) {
      // a sequence as the key's value: its dashes at the key's column (compact) or right of it
      if (indent < pending.indent) return undefined;
      const list: Json[] = [];
      pending.map[pending.key] = list;
      stack.push({ seq: true, indent, list });
      pending = undefined;
    }
    while (stack.length && stack[stack.length - 1]!.indent > indent) stack.pop();
    const top = stack[stack.length - 1];
    if (!top || !top.seq || top.indent !== indent) return undefined;
    const content = item![2]!;
    const column = line.length - content.length;
    const km = LINE.exec(content);
    if (km) {
      // `- key: …`: a mapping whose keys stand at the column of its first one
      const map: Mapping = {};
      top.list.push(map);
      stack.push({ seq: false, indent: column, map });
      if (!keyLine(column, km[2]!, km[3])) return undefined;
      continue;
    }
    const v = value(content);
    if (v === OUT) return undefined;
    top.list.push(v);
  }
  // an empty last document (a trailing `---`) or no document at all: js-yaml's own rules decide
  if (pending || !root) return undefined;
  docs.push(root);
  return docs;
}
