/**
 * lib/yaml-depth.ts: YAML nested past 64 collections is found before any parser recurses into it, in
 * every style (flow, block, compact block sequences, mixed, several documents), at once for a hostile
 * file; nothing nested 64 deep or less is refused; the one-pass bound is never below the real nesting.
 * And standalone/manifests.ts refuses such a text (YAML or JSON) naming the file and the rule.
 */
import { stringify } from 'yaml';
import { MAX_YAML_DEPTH, yamlNestingBound, yamlNestingPast } from '../../lib/yaml-depth.js';
import { loadManifestText, type LoadResult } from '../../standalone/manifests.js';
import { deepYaml } from '../fixtures/refused-manifests.js';
import { rng } from '../helpers/rng.js';

/** A value of `depth` collections inside one another, each a sequence or a mapping as `r` picks. */
function nested(depth: number, r: () => number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = r() < 0.5 ? [v, 1] : { k: v, n: 1 };
  return v;
}

const STYLES = [
  {},
  { collectionStyle: 'flow' as const },
  { indentSeq: false },
  { indent: 1 },
  { flowCollectionPadding: false, collectionStyle: 'flow' as const },
];

test('64 collections deep passes in every style; 67 deep is refused, whatever the style', () => {
  const r = rng(38);
  for (let i = 0; i < 50; i++) {
    const style = STYLES[i % STYLES.length]!;
    // the document's own mapping is one collection: a value 63 deep makes 64
    const ok = stringify({ spec: nested(MAX_YAML_DEPTH - 1, r) }, style);
    expect({ style, found: yamlNestingPast(ok) }).toEqual({ style, found: undefined });
    const deep = stringify({ spec: nested(MAX_YAML_DEPTH + 2, r) }, style);
    expect({ style, found: yamlNestingPast(deep) }).toEqual({ style, found: expect.objectContaining({ document: 0 }) });
    expect(yamlNestingBound(ok)).toBeGreaterThanOrEqual(MAX_YAML_DEPTH);
  }
});

test('the one-pass bound is never below the real nesting (random depths and styles)', () => {
  const r = rng(3838);
  for (let i = 0; i < 300; i++) {
    const depth = 1 + Math.floor(r() * 40);
    const text = stringify({ spec: nested(depth, r) }, STYLES[i % STYLES.length]);
    expect(yamlNestingBound(text)).toBeGreaterThanOrEqual(depth + 1);
    // below the bound, the exact scan agrees: never refused
    expect(yamlNestingPast(text, depth + 1)).toBeUndefined();
  }
});

test('compact block sequences and explicit keys on one line, and a later document, are counted', () => {
  const chain = (n: number, item = '- '): string => `${item.repeat(n)}x\n`;
  expect(yamlNestingPast(chain(MAX_YAML_DEPTH))).toBeUndefined();
  expect(yamlNestingPast(chain(70))).toMatchObject({ document: 0, line: 1 });
  expect(yamlNestingPast(`a:\n${chain(70, '  - ')}`)).toMatchObject({ line: 2 });
  expect(yamlNestingPast(chain(70, '? '))).toMatchObject({ line: 1 });
  expect(yamlNestingPast(`a: 1\n---\nb: 2\n---\nc: ${'['.repeat(70)}${']'.repeat(70)}\n`)).toEqual({
    document: 2,
    line: 5,
    column: 3 + 68, // `c: ` and 68 brackets: the document's mapping and 67 sequences
  });
});

test('a 1 MiB hostile file is refused in milliseconds (not the 10–25 s parse), its nesting never built', () => {
  for (const text of [
    '['.repeat(500_000) + ']'.repeat(500_000),
    `a: ${'{a: '.repeat(200_000)}1${'}'.repeat(200_000)}`,
    '- '.repeat(500_000) + 'x',
    deepYaml('d', 100_000),
  ]) {
    const t0 = performance.now();
    expect(yamlNestingPast(text)).toMatchObject({ document: 0 });
    expect(performance.now() - t0).toBeLessThan(5000); // the parse took 10–25 s; the scan takes milliseconds (a loaded machine: generous)
  }
});

test('quoted brackets, braces in plain scalars and comments: bounded above, never refused for them', () => {
  const text = [
    'a: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["',
    "b: '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'",
    '# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[',
    'c: /users/{id}/[0-9]+',
  ].join('\n');
  expect(yamlNestingBound(text)).toBeGreaterThan(MAX_YAML_DEPTH);
  expect(yamlNestingPast(text)).toBeUndefined();
});

test('manifests: a deep YAML or JSON file is refused naming the file and the rule; the next file still loads', () => {
  const into: LoadResult = { resources: [], errors: [], files: [] };
  loadManifestText(deepYaml('deep', 10_000), 'deep.yaml', into);
  loadManifestText('['.repeat(10_000) + ']'.repeat(10_000), 'deep.json', into);
  loadManifestText(
    'apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ok}\nspec: {proxy: {listen_path: /ok/}}\n',
    'ok.yaml',
    into,
  );
  expect(into.errors).toEqual([
    {
      file: 'deep.yaml',
      message: 'invalid YAML: nested deeper than 66 levels (document 0, line 5, column 76): not parsed',
    },
    { file: 'deep.json', message: 'invalid JSON: nested deeper than 66 levels (at offset 66): not parsed' },
  ]);
  expect(into.resources.map((r) => r.resource.metadata.name)).toEqual(['ok']);
});
