import type { CompiledApi } from '../../contract/config.js';
import { route, trieStats } from '../../sidecar/proxy/router.js';

/** The rule as a scan of the APIs, longest listen path first (docs/contract.md#request-path): the trie must agree with it. */
function scan(apis: readonly CompiledApi[], path: string): { name: string; rel: string } | undefined {
  for (const a of apis) {
    const lp = a.listenPath;
    if (!(path.startsWith(lp) || (lp.endsWith('/') && path === lp.slice(0, -1)))) continue;
    const rest = path.slice(Math.min(lp.length, path.length));
    return { name: a.name, rel: rest === '' ? '/' : rest.startsWith('/') ? rest : `/${rest}` };
  }
  return undefined;
}

const apiOn = (name: string, listenPath: string): CompiledApi => ({ name, listenPath }) as unknown as CompiledApi;
const sorted = (apis: CompiledApi[]): CompiledApi[] =>
  apis.sort((a, b) => b.listenPath.length - a.listenPath.length || a.listenPath.localeCompare(b.listenPath));
const routeOf = (apis: readonly CompiledApi[], path: string): { name: string; rel: string } | undefined => {
  const r = route(apis, path);
  return r && { name: r.api.name, rel: r.relPath };
};

describe('routing by the longest listen path', () => {
  const apis = sorted([
    apiOn('root', '/'),
    apiOn('a', '/a/'),
    apiOn('ab', '/a/b/'),
    apiOn('noslash', '/x'),
    apiOn('xy', '/xy/'),
  ]);
  test.each([
    ['/a/b/c', 'ab', '/c'],
    ['/a/b', 'ab', '/'],
    ['/a/bc', 'a', '/bc'],
    ['/a', 'a', '/'],
    ['/ab', 'root', '/ab'],
    ['/x', 'noslash', '/'],
    ['/xz', 'noslash', '/z'],
    ['/x/1', 'noslash', '/1'],
    ['/xy', 'xy', '/'],
    ['/xy/1', 'xy', '/1'],
    ['/zzz', 'root', '/zzz'],
    ['/', 'root', '/'],
  ])('%s → %s with relative path %s', (path, name, rel) => {
    expect(routeOf(apis, path)).toEqual({ name, rel });
    expect(scan(apis, path)).toEqual({ name, rel });
  });

  test('no API on the path: undefined; the first of two APIs on one listen path is served', () => {
    expect(routeOf(sorted([apiOn('a', '/a/')]), '/b')).toBeUndefined();
    expect(routeOf([apiOn('first', '/s/'), apiOn('second', '/s/')], '/s/1')?.name).toBe('first');
  });

  test('agrees with the scan on random listen paths and paths', () => {
    let seed = 7;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const piece = (): string => ['a', 'b', 'ab', '/', 'a/', 'b/'][rnd(6)]!;
    const word = (parts: number): string => '/' + Array.from({ length: parts }, piece).join('');
    for (let round = 0; round < 50; round++) {
      const seen = new Set<string>();
      const apis: CompiledApi[] = [];
      for (let i = 0; i < 1 + rnd(12); i++) {
        const lp = word(rnd(4));
        if (seen.has(lp)) continue;
        apis.push(apiOn(`api${i}`, lp));
        seen.add(lp);
      }
      sorted(apis);
      for (let j = 0; j < 100; j++) {
        const p = word(rnd(6));
        expect(routeOf(apis, p)).toEqual(scan(apis, p));
      }
    }
  });

  test('a new API list is routed by its own listen paths', () => {
    const one = [apiOn('one', '/p/')];
    const two = [apiOn('two', '/p/')];
    expect(routeOf(one, '/p/x')?.name).toBe('one');
    expect(routeOf(two, '/p/x')?.name).toBe('two');
  });
});

describe('a new API list that differs by a few APIs updates the last trie', () => {
  test('after every edit (added, removed, replaced APIs) routing agrees with the scan, and with a fresh trie', () => {
    let seed = 7;
    const rnd = (n: number): number => (seed = (seed * 1664525 + 1013904223) >>> 0) % n;
    const paths = ['/', '/a', '/a/', '/a/b/', '/ab/', '/b/', '/b/c', '/c/d/e/', '/x/', '/xy/'];
    let apis = sorted(paths.slice(0, 5).map((p, i) => apiOn(`v${i}`, p)));
    let version = 100;
    const before = { ...trieStats };
    for (let step = 0; step < 300; step++) {
      const next = [...apis];
      const what = rnd(4);
      const free = paths.filter((p) => !next.some((a) => a.listenPath === p));
      if (what === 0 && free.length) next.push(apiOn(`v${version++}`, free[rnd(free.length)]!));
      else if (what === 1 && next.length > 1) next.splice(rnd(next.length), 1);
      else if (next.length) {
        // an edited API: a new object on the same or another free listen path
        const i = rnd(next.length);
        const to = what === 2 || !free.length ? next[i]!.listenPath : free[rnd(free.length)]!;
        next[i] = apiOn(`v${version++}`, to);
      }
      apis = sorted(next);
      for (const p of [
        '/',
        '/a',
        '/a/',
        '/a/b',
        '/a/b/c',
        '/ab',
        '/abc',
        '/b',
        '/b/c',
        '/b/cd',
        '/c/d/e',
        '/x',
        '/xy/z',
        '/z',
      ]) {
        expect({ step, p, r: routeOf(apis, p) }).toEqual({ step, p, r: scan(apis, p) });
      }
    }
    // every edit updated the last trie; none was built again
    expect(trieStats.built - before.built).toBeLessThanOrEqual(1);
    expect(trieStats.updated - before.updated).toBeGreaterThan(250);
  });

  test('a burst: hundreds of APIs in and out of thousands update the trie in place, routing as the scan', () => {
    let apis = sorted(Array.from({ length: 2000 }, (_, i) => apiOn(`b${i}`, `/b${i}/`)));
    route(apis, '/');
    const before = { ...trieStats };
    for (let step = 0; step < 3; step++) {
      // 100 gone, 800 new (some under existing listen paths: longer prefixes), each a new list
      const kept = apis.filter((_, i) => i % 20 !== step);
      const added = Array.from({ length: 800 }, (_, i) => apiOn(`s${step}-${i}`, `/b${i}/s${step}/`));
      apis = sorted([...kept, ...added]);
      for (const p of ['/b1/x', `/b1/s${step}/x`, '/b40/', `/b799/s${step}`, '/b1999/y', '/none', `/b${step}/`])
        expect({ step, p, r: routeOf(apis, p) }).toEqual({ step, p, r: scan(apis, p) });
    }
    expect(trieStats.built - before.built).toBe(0);
    expect(trieStats.updated - before.updated).toBe(3);
  });

  test('a listen path held by two APIs (not a compiled config): the first in the list, updated or built', () => {
    const one = apiOn('one', '/s/');
    const two = apiOn('two', '/s/');
    const other = apiOn('other', '/o/');
    expect(routeOf([one, two, other], '/s/x')?.name).toBe('one');
    expect(routeOf([two, one, other], '/s/x')?.name).toBe('two');
    expect(routeOf([two, other], '/s/x')?.name).toBe('two');
    expect(routeOf([one, other], '/s/x')?.name).toBe('one');
    expect(routeOf([other], '/s/x')).toBeUndefined();
  });
});
