import type { CompiledApi } from '../../contract/config.js';
import { route } from '../../sidecar/proxy/router.js';

/** The rule as a scan of the APIs, longest listen path first (SPEC.md §3.1): the trie must agree with it. */
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
