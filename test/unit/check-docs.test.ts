/** What the repository's text may cite (scripts/check-docs.ts, run by `make lint`): the tree as it is, and the checker itself. */
import { describe, expect, test } from '@jest/globals';
import { anchorsOf, architectureProblems, docProblems, slug, treeProblems } from '../../scripts/check-docs.js';

// the outside file's name is built, so this test does not itself cite it
const OUTSIDE = ['SP', 'EC'].join('');
const CITES = 'cites the specification outside the repository: cite docs/contract.md#<section>';

describe('docs and comments cite the repository only, and carry no work-log label', () => {
  test('the tree: no outside citation, no label, every contract section cited exists', () => {
    expect(treeProblems(process.cwd())).toEqual([]);
  });

  test("headings' anchors are GitHub's", () => {
    expect(slug('DRL bounds')).toBe('drl-bounds');
    expect(slug('Rate-limit pattern')).toBe('rate-limit-pattern');
    expect(slug('`make bench-scale`')).toBe('make-bench-scale');
    expect([...anchorsOf('# Top\n```\n# not a heading\n```\n## Limit by\n')]).toEqual(['top', 'limit-by']);
  });

  test('the checker finds each kind of problem, and passes what is allowed', () => {
    const files = new Map([
      ['lib/a.ts', `/** The DRL (${OUTSIDE}.md §3.2). */`],
      ['lib/b.ts', `// see ${OUTSIDE} §8: hostile input`],
      ['lib/c.ts', '// from /work/shared/seed/rate-limiting-gateway.md'],
      [
        'docs/x.md',
        'Measured in stop 27: 0.97.\nRun I saved 2 MB.\nSession of 26 Nov, 13:00 UTC.\nkept for honesty\nStage 3 done.\nAgainst the build 4981fe3: 1.02.',
      ],
      ['lib/d.ts', '// bounds: docs/contract.md#drl-bounds and docs/contract.md#no-such-section; docs/gone.md'],
      [
        'lib/ok.ts',
        '// docs/contract.md#drl-bounds; docs/x.md; RFC 6749 §5.2; a SPECIFIER; stop the server; run a test; the build deadbeef; stage the files; /shared/ path',
      ],
    ]);
    const exists = (p: string): boolean => p === 'docs/x.md' || p === 'docs/contract.md';
    expect(docProblems(files, new Set(['drl-bounds']), exists)).toEqual([
      `lib/a.ts:1: ${CITES}`,
      `lib/b.ts:1: ${CITES}`,
      'lib/c.ts:1: cites the product spec outside the repository: cite docs/',
      'lib/c.ts:1: names a path outside the repository',
      'docs/x.md:1: carries a numbered-stage label ("stop N")',
      'docs/x.md:2: carries a run label ("run X")',
      'docs/x.md:3: carries a dated run',
      'docs/x.md:4: keeps a superseded figure',
      'docs/x.md:5: carries a numbered-stage label ("stage N")',
      'docs/x.md:6: names a build by its commit: history lives in git',
      'lib/d.ts:1: docs/contract.md has no section #no-such-section',
      'lib/d.ts:1: docs/gone.md does not exist',
    ]);
  });
});

describe("docs/architecture.md's map is the tree", () => {
  // a small tree: folder → entries (files have no entry list), file → text
  const tree: Record<string, string[]> = {
    '.': ['lib', 'sidecar', 'docs'],
    lib: ['serve.ts', 'store'],
    'lib/store': ['redis.ts', 'scripts.ts'],
    sidecar: ['proxy'],
    'sidecar/proxy': ['limit.ts', 'route-request.ts'],
    docs: ['architecture.md'],
  };
  const texts: Record<string, string> = {
    'lib/serve.ts': 'export function listen() {}',
    'lib/store/redis.ts': 'export function storeHealth() {}',
  };
  const list = (dir: string): string[] | undefined => tree[dir];
  const read = (p: string): string | undefined => texts[p];
  const folders = ['lib', 'sidecar', 'docs'];
  const doc = (rows: string): string =>
    [
      '## Folder map',
      '| folder | component | what |',
      '|---|---|---|',
      '| `lib/` | shared | `serve.ts`, `store/` (`redis.ts`, `scripts.ts`) |',
      '| `sidecar/` | gateway | `proxy/` (`limit.ts`) |',
      '| `docs/` | docs | `architecture.md` |',
      '## The request path',
      'The steps, one per file of `sidecar/proxy/`:',
      '| step | file |',
      '|---|---|',
      '| `routeRequest` | `route-request.ts` |',
      '## Where each rule lives',
      '| rule | file |',
      '|---|---|',
      rows,
    ].join('\n');

  test('a map that matches: no problem (names read against the folders named before them)', () => {
    const ok = doc('| listening | `lib/serve.ts` (`listen`), `lib/store/redis.ts` (`storeHealth`), `scripts.ts` |');
    expect(architectureProblems(ok, folders, list, read)).toEqual([]);
  });

  test('a stale file, a stale function, a folder the tree lacks and one the map lacks are each a problem', () => {
    const stale = doc(
      '| listening | `lib/serve.ts` (`listenAll`), `lib/{serve,gone}.ts`, `lib/store/*.lua` (`lib/serve.test.ts`) |',
    )
      .replace('| `docs/` | docs | `architecture.md` |', '| `old/` | gone | |')
      .replace('`route-request.ts`', '`router.ts`');
    expect(architectureProblems(stale, folders, list, read)).toEqual([
      'docs/architecture.md:6: the folder map names old/, which the tree does not have',
      'docs/architecture.md:11: router.ts does not exist (read in sidecar/proxy/, ./)',
      'docs/architecture.md:15: lib/serve.ts has no listenAll',
      'docs/architecture.md:15: lib/gone.ts does not exist',
      'docs/architecture.md:15: lib/store/*.lua does not exist',
      'docs/architecture.md:15: lib/serve.test.ts does not exist',
      'docs/architecture.md: the folder map does not name docs/',
    ]);
  });

  test("the tree's own map: a renamed function in the rules table is found", () => {
    const root = process.cwd();
    const { readdirSync, readFileSync, existsSync, statSync } = process.getBuiltinModule('node:fs');
    const at = (p: string): string => `${root}/${p}`;
    const fsList = (dir: string): string[] | undefined =>
      existsSync(at(dir)) && statSync(at(dir)).isDirectory() ? readdirSync(at(dir)) : undefined;
    const fsRead = (p: string): string | undefined => (existsSync(at(p)) ? readFileSync(at(p), 'utf8') : undefined);
    const top = readdirSync(root).filter(
      (n) => !n.startsWith('.') && !['node_modules', 'dist', 'coverage'].includes(n) && statSync(at(n)).isDirectory(),
    );
    const real = readFileSync(at('docs/architecture.md'), 'utf8');
    expect(architectureProblems(real, top, fsList, fsRead)).toEqual([]);
    const renamed = real.replace('(`regexWildcards`, `oasPathPattern`)', '(`regexWildcardz`, `oasPathPattern`)');
    expect(architectureProblems(renamed, top, fsList, fsRead)).toEqual([
      expect.stringMatching(/^docs\/architecture\.md:\d+: lib\/path-pattern\.ts has no regexWildcardz$/),
    ]);
  });
});
