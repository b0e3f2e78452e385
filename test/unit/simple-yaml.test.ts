/**
 * lib/simple-yaml.ts: for every text it accepts, exactly js-yaml's loadAll with the core schema (the
 * parser it stands in for); texts outside its subset are left to the full parser. Random texts built from
 * lines in and around the subset (typed scalars, quotes, comments, flow collections, nesting, duplicates,
 * indentation slips, empty documents) are compared with js-yaml.
 */
import { CORE_SCHEMA, loadAll } from 'js-yaml';
import { simpleYamlDocuments } from '../../lib/simple-yaml.js';
import { rng } from '../helpers/rng.js';

/** js-yaml's documents, or 'error' when it refuses the text. */
function reference(text: string): unknown {
  try {
    return loadAll(text, { schema: CORE_SCHEMA, maxAliases: 0 });
  } catch {
    return 'error';
  }
}

const SCALARS = [
  'abc',
  'k-1',
  '/api-1/',
  'http://127.0.0.1:9',
  'hello world',
  'a  b',
  'true',
  'True',
  'TRUE',
  'false',
  'yes',
  'no',
  'on',
  'null',
  'Null',
  '~',
  '~x',
  '0',
  '12',
  '012',
  '-1',
  '+1',
  '+',
  '-',
  '1.5',
  '.5',
  '1e5',
  '1e400',
  '.inf',
  '-.inf',
  '.nan',
  '0x1F',
  '0o17',
  '0b101',
  '1_000',
  '9007199254740993',
  '0e12345',
  '1e53abc',
  'a:b',
  'a: b',
  'a:',
  'a #b',
  'a#b',
  "'quoted'",
  "'it''s'",
  '"dq"',
  '"a\\nb"',
  "'a: b, c'",
  '"#x"',
  "''",
  '""',
  '@x',
  '`x',
  '!tag x',
  '&anchor x',
  '*alias',
  '|',
  '>',
  '%x',
  '---',
  '...',
  '[a, b]',
  '[]',
  '[1, true, ~, x]',
  '[a, [b]]',
  '{}',
  '{a: 1, b: x}',
  '{a: 1, a: 2}',
  '{a: \'x, y\', b: "z}"}',
  '{a: 1,}',
  '{a:1}',
  '{a: {b: 1}}',
  '{true: 1}',
  '{a: 1} # c',
  'x # comment',
];
const KEYS = ['a', 'b', 'key_hash', 'metadata', 'spec', 'rate', 'True', 'null', 'x.y/z', '__proto__', 'constructor'];

function pick<T>(xs: readonly T[], r: () => number): T {
  return xs[Math.floor(r() * xs.length)]!;
}

function randomText(r: () => number, seqs = false): string {
  const lines: string[] = [];
  if (r() < 0.2) lines.push('---');
  const docs = 1 + Math.floor(r() * 3);
  for (let d = 0; d < docs; d++) {
    if (d > 0) lines.push(r() < 0.95 ? '---' : '--- ');
    const n = 1 + Math.floor(r() * 6);
    let indent = 0;
    for (let i = 0; i < n; i++) {
      const roll = r();
      if (roll < 0.03) lines.push(pick(['# comment', '  # indented', '', '   ', '#'], r));
      else if (roll < 0.05) lines.push(pick(['- item', '\tkey: x', 'key:x', 'key: x ', 'key:  x', 'a : b', '? a'], r));
      const key = r() < 0.85 ? pick(KEYS.slice(0, 6), r) : pick(KEYS, r);
      if (seqs && r() < 0.3) {
        // a block sequence entry at this column (or one off): a scalar, `key: v`, `key:` or `-` alone
        const at = Math.max(0, indent + (r() < 0.85 ? 0 : r() < 0.5 ? -1 : 2));
        const dash = `${' '.repeat(at)}-${r() < 0.9 ? ' ' : '   '}`;
        const roll2 = r();
        const scalar = pick(r() < 0.5 ? SCALARS.slice(0, 40) : SCALARS, r);
        if (roll2 < 0.4) lines.push(`${dash}${scalar}`);
        else if (roll2 < 0.75) {
          lines.push(`${dash}${key}: ${scalar}`);
          indent = dash.length; // the entry's further keys stand at its first key's column
        } else if (roll2 < 0.95) {
          lines.push(`${dash}${key}:`);
          indent = dash.length + (r() < 0.5 ? 0 : 2);
        } else lines.push(`${' '.repeat(at)}-`);
        continue;
      }
      if (r() < 0.25) {
        lines.push(`${' '.repeat(indent)}${key}:`);
        indent += r() < 0.9 ? 2 : 4;
        continue;
      }
      // half the values from the first 40 scalars (mostly in the subset), half from all of them
      lines.push(`${' '.repeat(indent)}${key}: ${pick(r() < 0.5 ? SCALARS.slice(0, 40) : SCALARS, r)}`);
      if (indent > 0 && r() < 0.3) indent = r() < 0.9 ? Math.max(0, indent - 2) : indent - 1;
    }
  }
  if (r() < 0.1) lines.push('---');
  return lines.join('\n') + (r() < 0.8 ? '\n' : '');
}

test.each([
  ['block mappings', false],
  ['block mappings and sequences', true],
])('every text the subset reader accepts reads as js-yaml reads it: %s', (_, seqs) => {
  const r = rng(seqs ? 27 : 26);
  let accepted = 0;
  let withSequences = 0;
  for (let i = 0; i < 20_000; i++) {
    const text = randomText(r, seqs);
    const got = simpleYamlDocuments(text);
    if (got === undefined) continue;
    accepted++;
    if (/^ *- /m.test(text)) withSequences++;
    const want = reference(text);
    if (JSON.stringify(got) !== JSON.stringify(want))
      throw new Error(`differs from js-yaml for:\n${text}\ngot ${JSON.stringify(got)}\nwant ${JSON.stringify(want)}`);
    expect(got).toEqual(want);
  }
  // the generator stays near the subset: a good share is accepted (and so compared)
  expect(accepted).toBeGreaterThan(seqs ? 800 : 1_500);
  if (seqs)
    expect(withSequences).toBeGreaterThan(100); // seeded: 115 of them
  else expect(withSequences).toBe(0);
});

test('typed scalars, quotes, comments and flow collections of a manifest', () => {
  const text = [
    '# a key',
    'apiVersion: gw.io/v1alpha1',
    'kind: AccessKey',
    'metadata: {name: k-1}',
    'spec:',
    '  key_hash: 0e12345678901234567890123456789012345678901234567890123456789012',
    '  rate: 100',
    '  per: 1.5',
    "  alias: 'a: b'",
    '  is_inactive: false',
    '  tags: [a, b]',
    '  meta_data:',
    '    x: ~',
    '---',
    'kind: ApiDefinition',
    "spec: {proxy: '/x/', n: 0x10}",
  ].join('\n');
  const got = simpleYamlDocuments(text);
  expect(got).toEqual(loadAll(text, { schema: CORE_SCHEMA }));
  expect((got as { spec: { key_hash: unknown } }[])[0]!.spec.key_hash).toBe(
    0e12345678901234567890123456789012345678901234567890123456789012,
  );
});

test('block sequences as tools write them: indented or at their key column, scalars and mappings as entries', () => {
  for (const text of [
    'spec:\n  apply_policies:\n    - pol-0\n    - pol-1\n  rate: 5\n',
    'spec:\n  apply_policies:\n  - pol-0\n  - 12\n  rate: 5\n',
    'rate_limit:\n  - path: /users/{id}\n    method: GET\n    rate: 5\n  - path: /orders/[0-9]+\n    per: 1\n',
    "a:\n- b:\n  - c: [x, y]\n    d: {e: 1}\n  - 'q'\nf: 2\n",
    'a:\n  - x\n---\nb:\n  - y\n',
  ]) {
    const got = simpleYamlDocuments(text);
    expect({ text, got }).toEqual({ text, got: loadAll(text, { schema: CORE_SCHEMA }) });
  }
});

test('outside the subset: left to the full parser', () => {
  for (const text of [
    'a: 1\na: 2\n', // duplicate key
    '__proto__: {a: 1}\n',
    'a:\n', // null value
    'a:\n  -\n    x\n', // a dash alone
    'a:\n  - - x\n', // a sequence in a sequence's entry
    'a:\n  - x\n - y\n', // entries at two columns
    'a:\n- b: 1\n   c: 2\n', // an entry's keys at two columns
    'a: |\n  x\n', // block scalar
    'a: &x 1\nb: *x\n', // anchors
    'a: "\\n"\n', // escapes
    'a: 1 # c\n', // trailing comment
    'a: 1\r\n', // CRLF
    'a: é\n', // non-ASCII
    'a: 1\n---\n', // an empty last document
    '', // no document
    '  a: 1\n', // indented root
    'a:\n    b: 1\n  c: 2\n', // indentation slip
  ])
    expect(simpleYamlDocuments(text)).toBeUndefined();
});
