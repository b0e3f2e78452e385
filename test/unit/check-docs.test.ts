/** What the repository's text may cite (scripts/check-docs.ts, run by `make lint`): the tree as it is, and the checker itself. */
import { describe, expect, test } from '@jest/globals';
import { anchorsOf, docProblems, slug, treeProblems } from '../../scripts/check-docs.js';

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
      ['docs/x.md', 'Measured in stop 27: 0.97.\nRun I saved 2 MB.\nSession of 26 Nov, 13:00 UTC.\nkept for honesty'],
      ['lib/d.ts', '// bounds: docs/contract.md#drl-bounds and docs/contract.md#no-such-section; docs/gone.md'],
      [
        'lib/ok.ts',
        '// docs/contract.md#drl-bounds; docs/x.md; RFC 6749 §5.2; a SPECIFIER; stop the server; run a test; /shared/ path',
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
      'lib/d.ts:1: docs/contract.md has no section #no-such-section',
      'lib/d.ts:1: docs/gone.md does not exist',
    ]);
  });
});
