/** The nesting scan that every JSON body gw parses goes through before JSON.parse (lib/json-depth.ts). */
import {
  JsonDepthScanner,
  jsonNestingPastAt,
  jsonNestingExceeds,
  JsonTooDeepError,
  MAX_JSON_DEPTH,
  parseJson,
} from '../../lib/json-depth.js';
import { jsonShapeProblem } from '../../lib/json-shape.js';

const nested = (n: number, inner = '1') => `${'['.repeat(n)}${inner}${']'.repeat(n)}`;
const both = (s: string): [boolean, boolean] => [jsonNestingExceeds(s), jsonNestingExceeds(Buffer.from(s))];

describe('JSON nesting scan', () => {
  test('64 levels pass, 65 are refused, with the offset of the bracket past the bound; the same as the walk after a parse', () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(both(nested(64))).toEqual([false, false]);
    expect(both(nested(65))).toEqual([true, true]);
    expect(jsonNestingPastAt(nested(65))).toBe(64);
    expect(jsonNestingPastAt(`{"a":${nested(64)}}`)).toBe(68);
    // the scan and the walk of the parsed value (json-shape.ts, kept for __proto__) draw the line alike
    for (const n of [63, 64, 65]) {
      const text = `{"a":${nested(n - 1, '{}')}}`;
      expect(jsonNestingExceeds(text)).toBe(jsonShapeProblem(JSON.parse(text)) !== undefined);
    }
  });

  test('brackets inside strings do not count, escaped quotes do not end a string, an escaped backslash does not escape the quote', () => {
    const manyInString = JSON.stringify({ s: '['.repeat(1000) + '{'.repeat(1000) });
    expect(both(manyInString)).toEqual([false, false]);
    const escapedQuote = JSON.stringify({ s: `\\" ${'['.repeat(100)} \\"` }); // "\\\" [[[ \\\""
    expect(both(escapedQuote)).toEqual([false, false]);
    expect(both(`["\\"${'['.repeat(100)}"]`)).toEqual([false, false]); // \" inside: still in the string
    // "\\" closes the string (the backslash is escaped): the brackets after it are structure
    expect(both(`["\\\\",${nested(64)}]`)).toEqual([true, true]);
    expect(both(`["\\\\",${nested(63)}]`)).toEqual([false, false]);
    // closing brackets outside strings bring the level down: many shallow siblings pass
    expect(both(`[${Array(10_000).fill(nested(63)).join(',')}]`)).toEqual([false, false]);
  });

  test('multi-byte UTF-8 around the brackets gives the same answer for bytes and characters', () => {
    const s = `{"é€😀":"[[[ « ☃ »","k":${nested(64, '"😀"')}}`;
    expect(both(s)).toEqual([true, true]);
    expect(jsonNestingPastAt(Buffer.from(s))).toBe(Buffer.byteLength(s.slice(0, jsonNestingPastAt(s))));
  });

  test('parseJson: JsonTooDeepError past the bound, SyntaxError when malformed, the value otherwise', () => {
    expect(() => parseJson(nested(65))).toThrow(JsonTooDeepError);
    expect(() => parseJson(nested(65))).toThrow('nested deeper than 64 levels (at offset 64)');
    expect(() => parseJson('{"a":')).toThrow(SyntaxError);
    expect(parseJson(Buffer.from('{"a":[1,"]"]}'))).toEqual({ a: [1, ']'] });
  });

  test('the 1 MB attack body (500,000 nested arrays) is refused after 65 characters; a 1 MB flat body is scanned in linear time', () => {
    const deep = `{"user":{"id":${nested(500_000, '')}}}`;
    const t0 = performance.now();
    expect(jsonNestingPastAt(Buffer.from(deep))).toBe(14 + 62);
    const flat = Buffer.from(JSON.stringify(Array.from({ length: 100_000 }, (_, i) => ({ i, s: '[{' }))));
    const t1 = performance.now();
    expect(jsonNestingExceeds(flat)).toBe(false);
    const t2 = performance.now();
    expect(flat.length).toBeGreaterThan(1_500_000);
    // generous bounds (a shared 2-core machine): ~2 ms for 1.9 MB here
    expect(t1 - t0).toBeLessThan(200);
    expect(t2 - t1).toBeLessThan(200);
  });

  test('the scanner fed in pieces (a body as its chunks arrive) gives the answer of one scan at every split, a backslash ending a piece included', () => {
    const texts = [
      `["\\\\",${nested(64)}]`, // an escaped backslash, then structure
      `["\\\\",${nested(63)}]`,
      `["\\"${'['.repeat(100)}"]`, // an escaped quote: still in the string
      `["a\\\\\\"b",${nested(64, '"\\""')}]`,
      `["\\",${nested(64)}]`, // the string never ends: no structure after it
      `{"é€😀":"[[[ « ☃ »","k":${nested(64, '"😀"')}}`,
      nested(65),
    ];
    for (const text of texts) {
      const bytes = Buffer.from(text);
      const whole = jsonNestingPastAt(bytes);
      for (let cut = 0; cut <= bytes.length; cut++) {
        for (const third of [cut, Math.min(bytes.length, cut + 1), Math.min(bytes.length, cut + 3)]) {
          const s = new JsonDepthScanner();
          const a = s.feed(bytes.subarray(0, cut));
          const b = a >= 0 ? a : s.feed(bytes.subarray(cut, third));
          const c = b >= 0 ? b : s.feed(bytes.subarray(third));
          expect([cut, third, c]).toEqual([cut, third, whole]);
          expect(s.pastAt).toBe(whole);
        }
      }
    }
    // once past the bound, later pieces change nothing
    const s = new JsonDepthScanner(2);
    expect(s.feed(Buffer.from('[[['))).toBe(2);
    expect(s.feed(Buffer.from(']]]'))).toBe(2);
  });
});
