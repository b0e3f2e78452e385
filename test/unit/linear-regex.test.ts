/**
 * Linear-time path matching (docs/contract.md#hostile-input, lib/linear-regex.ts): the same answers as JavaScript's
 * RegExp on the dialect path patterns use, refusal (with the reason) of what cannot be matched so, and
 * at most a millisecond of matching for a 10 kB path on pathological pattern families.
 */
import { compileLinear, PatternError } from '../../lib/linear-regex.js';
import { endpointPattern, endpointPatternProblem, pathMatcher } from '../../lib/path-pattern.js';
import { ApiDefinitionSpec } from '../../crds/schemas/api-definition.js';

const SOURCES = [
  '^/?(?:docs/([a-z0-9]+-?)+/view)/?$',
  '^/?(?:users/.*)/?$',
  '^/?(?:users)/?$',
  '^(?:a|ab)(?:c|bcd)*$',
  '^(a*)*b$',
  '^(?:x{2,3}|y{1,})z?$',
  '^[^/]+/[\\d]{2}$',
  '^\\w+\\.json$',
  '^(?:$^)$',
  '^a{,2}$',
  '^[a-]*$',
  '^[\\d-x]*$',
  '^\\x41\\u0042c$',
  '^(?<n>ab)+$',
  '^(?:)$',
  '^.*a.*b.*c$',
  '^[]$',
  '^[^]*$',
  '^a{0}b$',
  '^(a|b|)+$',
  '^/?(?:^/users$)/?$',
  '^\\W\\S\\D[\\s]$',
  '^(?:a+?b*?)$',
];
const ALPHABET = [
  'a',
  'b',
  'c',
  '/',
  '-',
  '1',
  '2',
  'x',
  'y',
  'z',
  '.',
  'json',
  '{',
  ',',
  '}',
  'A',
  'B',
  '\n',
  ' ',
  'é',
];

/** A deterministic pseudo-random sequence (the same strings every run). */
function rng(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}

test.each(SOURCES)('%s: the same answers as RegExp, with and without case folding', (source) => {
  const rand = rng(source.length * 7919);
  for (const caseless of [false, true]) {
    const js = new RegExp(source, caseless ? 'i' : '');
    const m = compileLinear(source, caseless);
    for (let t = 0; t < 2000; t++) {
      let s = rand() < 0.3 ? '/' : '';
      const len = Math.floor(rand() * 9);
      for (let i = 0; i < len; i++) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
      if (m.test(s) !== js.test(s)) throw new Error(`${source} (${caseless ? 'i' : ''}) on ${JSON.stringify(s)}`);
    }
  }
});

test.each([
  ['^(a)\\1$', /backreferences/],
  ['^(?<x>a)\\k<x>$', /named backreferences/],
  ['^(?=a)a$', /lookahead and lookbehind/],
  ['^(?<!a)b$', /lookahead and lookbehind/],
  ['\\bword', /word boundaries/],
  ['(a|b)*a(a|b){14}', /too complex/],
  ['.*a.{30}', /too complex/],
  ['a{100000}', /too large/],
  ['(', /Unterminated group|unterminated/i],
])('%s is refused, saying why', (source, why) => {
  expect(() => compileLinear(source)).toThrow(PatternError);
  expect(() => compileLinear(source)).toThrow(why);
});

test('a resource holding such a pattern is refused with the field named', () => {
  const r = ApiDefinitionSpec.safeParse({
    proxy: { listen_path: '/x/' },
    use_extended_paths: true,
    extended_paths: { rate_limit: [{ path: '/a/(b)\\1', method: 'GET', rate: 1, per: 1 }] },
  });
  expect(r.success).toBe(false);
  expect(r.error!.issues[0]!.path).toEqual(['extended_paths', 'rate_limit', 0, 'path']);
  expect(r.error!.issues[0]!.message).toMatch(/linear time.*backreferences/);
  expect(endpointPatternProblem('/users/{id}')).toBeUndefined();
});

/** Median ms of `fn` over `runs` timed runs of `batch` calls each (timer injected: the test's clock). */
function medianMs(fn: () => void, now: () => number, runs = 15, batch = 10): number {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = now();
    for (let i = 0; i < batch; i++) fn();
    times.push((now() - t0) / batch);
  }
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)]!;
}

// nested quantifiers, overlapping alternations, stacked wildcards: each makes V8's backtracking engine
// exponential or polynomial on a near-miss path
const PATHOLOGICAL: [string, string][] = [
  ['/docs/([a-z0-9]+-?)+/view', '/docs/' + 'a'.repeat(10_000) + '!'],
  ['/(a+)+$', '/' + 'a'.repeat(10_000) + 'b'],
  ['/(a|a)*b', '/' + 'a'.repeat(10_000)],
  ['/(a|aa)+c', '/' + 'a'.repeat(10_000)],
  ['/(\\w+\\s?)*x', '/' + 'ab '.repeat(3_333)],
  ['/(.*)*z', '/' + 'y'.repeat(10_000)],
  ['/.*a.*b.*c.*d', '/' + 'abc'.repeat(3_333)],
  ['/(x+x+)+y', '/' + 'x'.repeat(10_000)],
  ['/([^/]*)*/end', '/' + 'q'.repeat(10_000)],
  ['/{a}/{b}/{c}/{d}/z', '/' + 'a/'.repeat(5_000)],
];

test.each(PATHOLOGICAL)('%s on a 10 kB path: at most 1 ms of matching', (path, request) => {
  const m = pathMatcher(endpointPattern(path));
  expect(m.test(request)).toBe(false);
  for (const caseless of [false, true]) {
    const mm = pathMatcher(endpointPattern(path), caseless);
    expect(
      medianMs(
        () => mm.test(request),
        () => performance.now(),
      ),
    ).toBeLessThanOrEqual(1);
  }
});

test('a nested quantifier over an optional character (exponential when backtracking): still matches what it should', () => {
  const m = pathMatcher(endpointPattern('/docs/([a-z0-9]+-?)+/view'));
  expect(m.test('/docs/abc-def/view')).toBe(true);
  expect(m.test('/docs/abc--def/view')).toBe(false);
  expect(pathMatcher(endpointPattern('/users'), true).test('/USERS/')).toBe(true);
  expect(pathMatcher(endpointPattern('/users'), false).test('/USERS/')).toBe(false);
});
