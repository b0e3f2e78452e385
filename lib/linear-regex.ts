/**
 * Path patterns matched in time linear in the path's length (docs/contract.md#hostile-input): the JavaScript regex dialect
 * that classic paths, policy endpoint paths and `allowed_urls` are written in, compiled to a DFA when the
 * pattern is loaded, so matching is one table step per character whatever the pattern. V8's own engine
 * backtracks: `/docs/([a-z0-9]+-?)+/view` took seconds on a 32-character path, and the whole process
 * waited.
 *
 * Supported: literals, `.`, classes (`[a-z]`, `[^/]`, `\d \w \s` and their negations), groups (`(…)`,
 * `(?:…)`, `(?<name>…)`), alternation, quantifiers (`* + ? {n} {n,} {n,m}`, greedy or lazy: a yes/no
 * match does not depend on it), `^` and `$`; escapes as JavaScript reads them without the `u` flag.
 * Refused, with the reason: backreferences, lookarounds, word boundaries (they need backtracking or a
 * second pass), and a pattern whose automaton would exceed MAX_NFA_NODES or MAX_DFA_STATES (a counted
 * repetition such as `(a|b){1000}` or `.*a.{20}`: its DFA is exponential; refused at load, never slow).
 * A match is whole-string (the sources of lib/path-pattern.ts are anchored) and yes/no: no captures.
 */

/** The reason a pattern cannot be matched in linear time (or is not a valid regex); names the construct. */
export class PatternError extends Error {}

export interface LinearMatcher {
  /** Whether the whole of `s` matches (`^` and `$` as written in the source; the sources are anchored). */
  test(s: string): boolean;
}

/** Upper bounds of a compiled pattern: beyond them it is refused (each bounds the load-time work and memory). */
export const MAX_NFA_NODES = 4000;
export const MAX_DFA_STATES = 2000;

type Ranges = number[]; // sorted, disjoint [lo, hi, lo, hi, …] of UTF-16 code units
type Ast =
  | { t: 'set'; r: Ranges }
  | { t: 'cat'; items: Ast[] }
  | { t: 'alt'; alts: Ast[] }
  | { t: 'rep'; node: Ast; min: number; max: number } // max -1: unbounded
  | { t: 'bol' }
  | { t: 'eol' };

const MAX_CODE = 0xffff;
const DIGIT: Ranges = [48, 57];
const WORD: Ranges = [48, 57, 65, 90, 95, 95, 97, 122];
const SPACE: Ranges = [
  9, 13, 32, 32, 160, 160, 5760, 5760, 8192, 8202, 8232, 8233, 8239, 8239, 8287, 8287, 12288, 12288, 65279, 65279,
];
const LINE_TERMINATORS: Ranges = [10, 10, 13, 13, 8232, 8233];

function normalise(r: Ranges): Ranges {
  const pairs: [number, number][] = [];
  for (let i = 0; i < r.length; i += 2) pairs.push([r[i]!, r[i + 1]!]);
  pairs.sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [lo, hi] of pairs) {
    const n = out.length;
    if (n && lo <= out[n - 1]! + 1) out[n - 1] = Math.max(out[n - 1]!, hi);
    else out.push(lo, hi);
  }
  return out;
}

function complement(r: Ranges): Ranges {
  const n = normalise(r);
  const out: Ranges = [];
  let next = 0;
  for (let i = 0; i < n.length; i += 2) {
    if (n[i]! > next) out.push(next, n[i]! - 1);
    next = n[i + 1]! + 1;
  }
  if (next <= MAX_CODE) out.push(next, MAX_CODE);
  return out;
}

/** ASCII case folding: every upper-case letter a set holds, it holds in lower case too (the input is lowered). */
function foldAscii(r: Ranges): Ranges {
  const extra: Ranges = [];
  for (let i = 0; i < r.length; i += 2) {
    const lo = Math.max(r[i]!, 65);
    const hi = Math.min(r[i + 1]!, 90);
    if (lo <= hi) extra.push(lo + 32, hi + 32);
  }
  return extra.length ? normalise([...r, ...extra]) : r;
}

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';
const isHex = (c: string | undefined): boolean => c !== undefined && /^[0-9a-fA-F]$/.test(c);

class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  parse(): Ast {
    const ast = this.alternation();
    if (this.i < this.s.length) throw new PatternError(`unbalanced ")" at ${this.i}`);
    return ast;
  }

  private peek(k = 0): string | undefined {
    return this.s[this.i + k];
  }

  private alternation(): Ast {
    const alts = [this.sequence()];
    while (this.peek() === '|') {
      this.i++;
      alts.push(this.sequence());
    }
    return alts.length === 1 ? alts[0]! : { t: 'alt', alts };
  }

  private sequence(): Ast {
    const items: Ast[] = [];
    while (this.i < this.s.length && this.peek() !== '|' && this.peek() !== ')') {
      const atom = this.atom();
      if (atom) items.push(this.quantified(atom));
    }
    return items.length === 1 ? items[0]! : { t: 'cat', items };
  }

  /** `{n}`, `{n,}` or `{n,m}` at the cursor: its bounds (and the cursor after it), else undefined. */
  private braces(): { min: number; max: number; end: number } | undefined {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(this.s.slice(this.i));
    if (!m) return undefined;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === '' ? -1 : Number(m[3]);
    return { min, max, end: this.i + m[0].length };
  }

  private quantified(atom: Ast): Ast {
    let min: number;
    let max: number;
    const c = this.peek();
    if (c === '*' || c === '+' || c === '?') {
      this.i++;
      [min, max] = c === '*' ? [0, -1] : c === '+' ? [1, -1] : [0, 1];
    } else if (c === '{') {
      const b = this.braces();
      if (!b) return atom; // a literal "{" (JavaScript without the u flag)
      if (b.max !== -1 && b.max < b.min) throw new PatternError('numbers out of order in {} quantifier');
      if (b.min > MAX_NFA_NODES || b.max > MAX_NFA_NODES) throw new PatternError('repetition count too large');
      this.i = b.end;
      [min, max] = [b.min, b.max];
    } else return atom;
    if (atom.t === 'bol' || atom.t === 'eol') throw new PatternError('nothing to repeat');
    if (this.peek() === '?') this.i++; // lazy: the same yes/no answer
    return { t: 'rep', node: atom, min, max };
  }

  private atom(): Ast | undefined {
    const c = this.s[this.i++]!;
    switch (c) {
      case '^':
        return { t: 'bol' };
      case '$':
        return { t: 'eol' };
      case '.':
        return { t: 'set', r: complement(LINE_TERMINATORS) };
      case '[':
        return { t: 'set', r: this.charClass() };
      case '\\':
        return this.escape();
      case '(':
        return this.group();
      case '*':
      case '+':
      case '?':
        throw new PatternError('nothing to repeat');
      case '{':
        this.i--;
        if (this.braces()) throw new PatternError('nothing to repeat');
        this.i++;
        return { t: 'set', r: [123, 123] };
      default:
        return { t: 'set', r: [c.charCodeAt(0), c.charCodeAt(0)] };
    }
  }

  private group(): Ast {
    if (this.peek() === '?') {
      const next = this.peek(1);
      if (next === ':') this.i += 2;
      else if (next === '<' && this.peek(2) !== '=' && this.peek(2) !== '!') {
        const close = this.s.indexOf('>', this.i);
        if (close === -1) throw new PatternError('unterminated group name');
        this.i = close + 1;
      } else if (next === '=' || next === '!' || next === '<') {
        throw new PatternError('lookahead and lookbehind assertions are not supported (they need backtracking)');
      } else throw new PatternError('group modifiers "(?…)" are not supported');
    }
    const inner = this.alternation();
    if (this.peek() !== ')') throw new PatternError('unterminated group');
    this.i++;
    return inner;
  }

  /** `\` outside a class (the cursor is after it). */
  private escape(): Ast {
    const c = this.s[this.i];
    if (c === undefined) throw new PatternError('\\ at end of pattern');
    if (c === 'b' || c === 'B') throw new PatternError('word boundaries (\\b, \\B) are not supported');
    if (c === 'k') throw new PatternError('named backreferences (\\k) are not supported');
    if (c >= '1' && c <= '9') throw new PatternError('backreferences (\\1…\\9) are not supported');
    return { t: 'set', r: this.escapeRanges(false) };
  }

  /** An escape's code units (the cursor is after the `\`), inside or outside a class. */
  private escapeRanges(inClass: boolean): Ranges {
    const c = this.s[this.i++]!;
    const one = (code: number): Ranges => [code, code];
    switch (c) {
      case 'd':
        return DIGIT;
      case 'D':
        return complement(DIGIT);
      case 'w':
        return WORD;
      case 'W':
        return complement(WORD);
      case 's':
        return SPACE;
      case 'S':
        return complement(SPACE);
      case 't':
        return one(9);
      case 'n':
        return one(10);
      case 'v':
        return one(11);
      case 'f':
        return one(12);
      case 'r':
        return one(13);
      case 'b':
        return one(8); // in a class: backspace
      case '0':
        if (isDigit(this.peek())) throw new PatternError('octal escapes are not supported');
        return one(0);
      case 'c': {
        const x = this.peek();
        if (x !== undefined && /[A-Za-z]/.test(x)) {
          this.i++;
          return one(x.charCodeAt(0) % 32);
        }
        throw new PatternError('\\c must be followed by a letter');
      }
      case 'x':
        if (isHex(this.peek()) && isHex(this.peek(1))) {
          this.i += 2;
          return one(parseInt(this.s.slice(this.i - 2, this.i), 16));
        }
        return one(120);
      case 'u':
        if ([0, 1, 2, 3].every((k) => isHex(this.peek(k)))) {
          this.i += 4;
          return one(parseInt(this.s.slice(this.i - 4, this.i), 16));
        }
        return one(117);
      default:
        if (inClass && c >= '1' && c <= '9') throw new PatternError('octal escapes are not supported');
        return one(c.charCodeAt(0)); // identity escape: \/ \. \- \\ …
    }
  }

  /** `[…]` (the cursor is after the `[`). */
  private charClass(): Ranges {
    let negate = false;
    if (this.peek() === '^') {
      negate = true;
      this.i++;
    }
    const out: Ranges = [];
    // one element: its ranges, and whether it is a single character (a range end) or a class escape
    const element = (): { r: Ranges; single: boolean } => {
      const c = this.s[this.i++]!;
      if (c !== '\\') return { r: [c.charCodeAt(0), c.charCodeAt(0)], single: true };
      if (this.i >= this.s.length) throw new PatternError('\\ at end of pattern');
      const e = this.s[this.i]!;
      if (e === '-') {
        this.i++;
        return { r: [45, 45], single: true };
      }
      const r = this.escapeRanges(true);
      return { r, single: !'dDwWsS'.includes(e) };
    };
    for (;;) {
      if (this.i >= this.s.length) throw new PatternError('unterminated character class');
      if (this.peek() === ']') {
        this.i++;
        break;
      }
      const a = element();
      if (this.peek() === '-' && this.peek(1) !== ']' && this.peek(1) !== undefined) {
        this.i++;
        const b = element();
        if (a.single && b.single) {
          if (b.r[0]! < a.r[0]!) throw new PatternError('range out of order in character class');
          out.push(a.r[0]!, b.r[0]!);
        } else out.push(...a.r, 45, 45, ...b.r); // Annex B: "-" beside a class escape is a literal
      } else out.push(...a.r);
    }
    const r = normalise(out);
    return negate ? complement(r) : r;
  }
}

// NFA node kinds
const CHAR = 0;
const SPLIT = 1;
const BOL = 2;
const EOL = 3;
const MATCH = 4;

class Nfa {
  kind: number[] = [];
  out: number[][] = [];
  sets: Ranges[] = [];

  add(kind: number, out: number[], set: Ranges = []): number {
    if (this.kind.length >= MAX_NFA_NODES)
      throw new PatternError(`too large: its automaton exceeds ${MAX_NFA_NODES} states`);
    this.kind.push(kind);
    this.out.push(out);
    this.sets.push(set);
    return this.kind.length - 1;
  }

  /** Thompson's construction, back to front: the entry of `ast` followed by `next`. */
  build(ast: Ast, next: number, caseless: boolean): number {
    switch (ast.t) {
      case 'set':
        return this.add(CHAR, [next], caseless ? foldAscii(ast.r) : ast.r);
      case 'bol':
        return this.add(BOL, [next]);
      case 'eol':
        return this.add(EOL, [next]);
      case 'cat': {
        let cur = next;
        for (let i = ast.items.length - 1; i >= 0; i--) cur = this.build(ast.items[i]!, cur, caseless);
        return cur;
      }
      case 'alt':
        return this.add(
          SPLIT,
          ast.alts.map((a) => this.build(a, next, caseless)),
        );
      case 'rep': {
        let cur = next;
        if (ast.max === -1) {
          const loop = this.add(SPLIT, []);
          this.out[loop] = [this.build(ast.node, loop, caseless), next];
          cur = loop;
        } else {
          for (let k = ast.min; k < ast.max; k++) cur = this.add(SPLIT, [this.build(ast.node, cur, caseless), next]);
        }
        for (let k = 0; k < ast.min; k++) cur = this.build(ast.node, cur, caseless);
        return cur;
      }
    }
  }

  private mark = new Int32Array(0);
  private generation = 0;

  /** The CHAR, EOL and MATCH nodes reachable from `seeds` without consuming (BOL passable only at the start). */
  closure(seeds: readonly number[], atStart: boolean, atEnd: boolean): number[] {
    if (this.mark.length < this.kind.length) this.mark = new Int32Array(this.kind.length);
    const gen = ++this.generation;
    const stack = seeds.slice();
    const out: number[] = [];
    while (stack.length) {
      const n = stack.pop()!;
      if (this.mark[n] === gen) continue;
      this.mark[n] = gen;
      const k = this.kind[n]!;
      if (k === SPLIT) for (const o of this.out[n]!) stack.push(o);
      else if (k === BOL) {
        if (atStart) stack.push(this.out[n]![0]!);
      } else if (k === EOL && atEnd) stack.push(this.out[n]![0]!);
      else out.push(n);
    }
    return out.sort((a, b) => a - b);
  }
}

/** A fully built DFA over character classes (code units that every set treats alike). */
class Dfa implements LinearMatcher {
  constructor(
    private readonly ascii: Uint16Array,
    private readonly bounds: Int32Array,
    private readonly classes: number,
    private readonly trans: Uint16Array,
    private readonly accept: Uint8Array,
    private readonly dead: number,
    private readonly caseless: boolean,
  ) {}

  test(s: string): boolean {
    const { ascii, bounds, classes, trans, dead, caseless } = this;
    let st = 0;
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      let cls: number;
      if (c < 128) {
        if (caseless && c >= 65 && c <= 90) c += 32;
        cls = ascii[c]!;
      } else cls = classOf(bounds, c);
      st = trans[st * classes + cls]!;
      if (st === dead) return false;
    }
    return this.accept[st] === 1;
  }
}

/** The class of code unit `c`: the last interval starting at or before it. */
function classOf(bounds: Int32Array, c: number): number {
  let lo = 0;
  let hi = bounds.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (bounds[mid]! <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Compiles `source` (a JavaScript regex without flags; `caseless`: ASCII letters in any case, as the `i`
 * flag) to a linear-time matcher. Throws PatternError naming what cannot be matched so.
 */
export function compileLinear(source: string, caseless = false): LinearMatcher {
  try {
    new RegExp(source); // JavaScript's own syntax errors, worded as everywhere else
  } catch (e) {
    throw new PatternError((e as Error).message);
  }
  const ast = new Parser(source).parse();
  const nfa = new Nfa();
  const match = nfa.add(MATCH, []);
  const entry = nfa.build(ast, match, caseless);

  // character classes: the intervals between the points where some set starts or ends
  const points = new Set<number>([0]);
  for (const r of nfa.sets)
    for (let i = 0; i < r.length; i += 2) {
      points.add(r[i]!);
      if (r[i + 1]! < MAX_CODE) points.add(r[i + 1]! + 1);
    }
  const bounds = Int32Array.from([...points].sort((a, b) => a - b));
  const classes = bounds.length;
  const ascii = new Uint16Array(128);
  for (let c = 0, cls = 0; c < 128; c++) {
    while (cls + 1 < classes && bounds[cls + 1]! <= c) cls++;
    ascii[c] = cls;
  }

  // the classes each CHAR node consumes
  const consumes: number[][] = nfa.sets.map((r, n) => {
    const out: number[] = [];
    if (nfa.kind[n] !== CHAR) return out;
    for (let i = 0; i < r.length; i += 2)
      for (let cls = classOf(bounds, r[i]!); cls < classes && bounds[cls]! <= r[i + 1]!; cls++) out.push(cls);
    return out;
  });

  // subset construction, every state at load: matching never builds anything
  const ids = new Map<string, number>();
  const states: number[][] = [];
  const accepts: number[] = [];
  const rows: Map<number, number>[] = [];
  const intern = (nodes: number[], atStart: boolean): number => {
    const key = nodes.join(',');
    let id = ids.get(key);
    if (id === undefined) {
      if (states.length >= MAX_DFA_STATES)
        throw new PatternError(
          `too complex: its automaton exceeds ${MAX_DFA_STATES} states (a long counted repetition?)`,
        );
      id = states.length;
      ids.set(key, id);
      states.push(nodes);
      accepts.push(nfa.closure(nodes, atStart, true).includes(match) ? 1 : 0);
    }
    return id;
  };
  intern(nfa.closure([entry], true, false), true);
  for (let s = 0; s < states.length; s++) {
    const next = new Map<number, number[]>(); // class → the nodes it leads to
    for (const n of states[s]!)
      for (const cls of consumes[n]!) {
        const l = next.get(cls);
        if (l) l.push(nfa.out[n]![0]!);
        else next.set(cls, [nfa.out[n]![0]!]);
      }
    const row = new Map<number, number>();
    for (const [cls, nodes] of next) row.set(cls, intern(nfa.closure(nodes, false, false), false));
    rows.push(row);
  }
  // a class a state has no transition on leads to the dead state (no node left)
  const dead = intern([], false);
  const trans = new Uint16Array(states.length * classes).fill(dead);
  rows.forEach((row, s) => row.forEach((t, cls) => (trans[s * classes + cls] = t)));
  return new Dfa(ascii, bounds, classes, trans, Uint8Array.from(accepts), dead, caseless);
}
