import { ApiDefinitionResource, PolicyResource, type ApiDefinition, type Policy } from '../../crds/kinds.js';
import { compileApi } from '../../compiler/compile-api.js';
import { compileConfig, servingApis } from '../../compiler/compile-config.js';
import { route } from '../../sidecar/proxy/router.js';
import { normalizePath } from '../../lib/request-path.js';

const api = (name: string, spec: unknown): ApiDefinition =>
  ApiDefinitionResource.parse({ apiVersion: 'gw.io/v1alpha1', kind: 'ApiDefinition', metadata: { name }, spec });

describe('compiling ApiDefinitions', () => {
  test('classic: global limit, enabled endpoint rules in array order, disabled ones dropped', () => {
    const c = compileApi(
      api('a', {
        proxy: { listen_path: '/a/', target_url: 'http://127.0.0.1:1' },
        global_rate_limit: { rate: 10, per: 60 },
        use_extended_paths: true,
        extended_paths: {
          rate_limit: [
            { path: '/users/{id}', method: 'GET', enabled: true, rate: 1, per: 1 },
            { path: '/off', method: 'GET', enabled: false, rate: 1, per: 1 },
            { path: '.*', method: 'GET', enabled: true, rate: 2, per: 1 },
          ],
        },
      }),
    );
    expect(c.apiLimit).toEqual({ rate: 10, per: 60 });
    expect(c.endpointRules.map((r) => r.id)).toEqual(['GET /users/{id}', 'GET .*']);
    expect(new RegExp(c.endpointRules[0]!.pattern).test('/users/42')).toBe(true);
    expect(new RegExp(c.endpointRules[0]!.pattern).test('/other')).toBe(false);
    expect(new RegExp(c.endpointRules[1]!.pattern).test('/anything/at/all')).toBe(true);
  });

  test('disable_rate_limit and rate/per both 0 turn the API-level limiter off', () => {
    expect(
      compileApi(
        api('a', { proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 5, per: 1 }, disable_rate_limit: true }),
      ).apiLimit,
    ).toBeUndefined();
    expect(
      compileApi(api('a', { proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 0, per: 0 } })).apiLimit,
    ).toBeUndefined();
  });

  test('extended paths are ignored unless use_extended_paths is true', () => {
    const c = compileApi(
      api('a', {
        proxy: { listen_path: '/a/' },
        extended_paths: { rate_limit: [{ path: '.*', method: 'GET', rate: 1, per: 1 }] },
      }),
    );
    expect(c.endpointRules).toEqual([]);
  });

  test('OAS: operationId lookup, duration per, paths order, listen path and auth from the extension', () => {
    const c = compileApi(
      api('cat', {
        oas: {
          openapi: '3.0.3',
          paths: {
            '/items/{id}': { get: { operationId: 'getItem' }, delete: { operationId: 'delItem' } },
            '/items': { get: { operationId: 'listItems' } },
          },
          'x-gw-api-gateway': {
            info: { id: 'catalog', state: { active: false } },
            server: { listenPath: { value: '/catalog/', strip: false }, authentication: { enabled: false } },
            upstream: { url: 'http://127.0.0.1:2', rateLimit: { enabled: true, rate: 50, per: '1m30s' } },
            middleware: {
              operations: {
                listItems: { rateLimit: { enabled: true, rate: 3, per: '10s' } },
                getItem: { rateLimit: { enabled: true, rate: 5, per: '500ms' } },
                delItem: { rateLimit: { enabled: false, rate: 1, per: '1s' } },
              },
            },
          },
        },
      }),
    );
    expect(c.api_id).toBe('catalog');
    expect(c.active).toBe(false);
    expect(c.keyless).toBe(true);
    expect(c.strip).toBe(false);
    expect(c.listenPath).toBe('/catalog/');
    expect(c.apiLimit).toEqual({ rate: 50, per: 90 }); // a Go-style sequence, as Tyk writes it
    expect(c.endpointRules.map((r) => [r.id, r.rate, r.per])).toEqual([
      ['GET /items/{id}', 5, 0.5],
      ['GET /items', 3, 10],
    ]);
  });

  test('a per-endpoint rule of 0/0 is off (skipped like enabled: false), classic and OAS; it used to refuse every request', () => {
    const classic = compileApi(
      api('z', {
        proxy: { listen_path: '/z/' },
        global_rate_limit: { rate: 10, per: 60 },
        use_extended_paths: true,
        extended_paths: {
          rate_limit: [
            { path: '/zero', method: 'GET', enabled: true, rate: 0, per: 0 },
            { path: '.*', method: 'GET', enabled: true, rate: 2, per: 1 },
          ],
        },
      }),
    );
    expect(classic.endpointRules.map((r) => r.id)).toEqual(['GET .*']);
    const oas = compileApi(
      api('o', {
        oas: {
          openapi: '3.0.3',
          paths: { '/zero': { get: { operationId: 'zero' } } },
          'x-gw-api-gateway': {
            info: { id: 'o' },
            server: { listenPath: { value: '/o/' } },
            middleware: { operations: { zero: { rateLimit: { enabled: true, rate: 0, per: '0s' } } } },
          },
        },
      }),
    );
    expect(oas.endpointRules).toEqual([]);
  });

  test('OAS paths are literal apart from {name} ($, +, ., brackets are not regex syntax); classic paths stay regexes; a trailing slash is the same endpoint', () => {
    const c = compileApi(
      api('od', {
        oas: {
          openapi: '3.0.3',
          paths: {
            '/$metadata': { get: { operationId: 'meta' } },
            '/v1.0/sum+count': { get: { operationId: 'sum' } },
            '/weird[': { get: { operationId: 'w' } },
          },
          'x-gw-api-gateway': {
            info: { id: 'od' },
            server: { listenPath: { value: '/od/' } },
            middleware: {
              operations: {
                meta: { rateLimit: { rate: 1, per: '1m' } },
                sum: { rateLimit: { rate: 1, per: '1m' } },
                w: { rateLimit: { rate: 1, per: '1m' } },
              },
            },
          },
        },
      }),
    );
    const [meta, sum, weird] = c.endpointRules.map((r) => new RegExp(r.pattern));
    expect([meta!.test('/$metadata'), meta!.test('/$metadata/'), meta!.test('/')]).toEqual([true, true, false]);
    expect([sum!.test('/v1.0/sum+count'), sum!.test('/v1x0/sum+count'), sum!.test('/v1.0/summcount')]).toEqual([
      true,
      false,
      false,
    ]);
    expect(weird!.test('/weird[')).toBe(true);
    const u = compileApi(
      api('u', {
        proxy: { listen_path: '/u/' },
        use_extended_paths: true,
        extended_paths: { rate_limit: [{ path: '/users', method: 'get', rate: 1, per: 1 }] },
      }),
    );
    expect(u.endpointRules[0]!.method).toBe('GET'); // any case, matched upper-cased
    const users = new RegExp(u.endpointRules[0]!.pattern);
    expect([
      users.test('/users'),
      users.test('/users/'),
      users.test('users'),
      users.test('/users/1'),
      users.test('/usersx'),
    ]).toEqual([true, true, true, false, false]);
  });

  test('OAS: either switch turns the API off (spec.active: false was overridden by info.state.active: true)', () => {
    const withState = (active: boolean, state: boolean | undefined): ApiDefinition =>
      api('s', {
        active,
        oas: {
          openapi: '3.0.3',
          paths: {},
          'x-gw-api-gateway': {
            info: { id: 's', ...(state === undefined ? {} : { state: { active: state } }) },
            server: { listenPath: { value: '/s/' } },
          },
        },
      });
    expect([compileApi(withState(false, true)).active, compileApi(withState(true, false)).active]).toEqual([
      false,
      false,
    ]);
    expect([
      compileApi(withState(true, true)).active,
      compileApi(withState(true, undefined)).active,
      compileApi(withState(false, undefined)).active,
    ]).toEqual([true, true, false]);
  });

  test('OAS: a middleware entry naming no operation, or an operationId used twice, is refused with the field (it limited nothing, silently)', () => {
    const oasApi = (paths: Record<string, unknown>, operations: Record<string, unknown>): ApiDefinition =>
      api('m', {
        oas: {
          openapi: '3.0.3',
          paths,
          'x-gw-api-gateway': {
            info: { id: 'm' },
            server: { listenPath: { value: '/m/' } },
            middleware: { operations },
          },
        },
      });
    const limit = { rateLimit: { enabled: true, rate: 1, per: '1s' } };
    expect(() => compileApi(oasApi({ '/users': { get: { operationId: 'getUsers' } } }, { getUser: limit }))).toThrow(
      'spec.oas.x-gw-api-gateway.middleware.operations.getUser: no operation in spec.oas.paths has operationId "getUser"',
    );
    expect(() =>
      compileApi(
        oasApi({ '/a': { get: { operationId: 'op' } }, '/b': { post: { operationId: 'op' } } }, { op: limit }),
      ),
    ).toThrow(
      'spec.oas.paths./b.post.operationId: duplicate operationId "op" (also at spec.oas.paths./a.get.operationId)',
    );
    // the well-formed document compiles
    expect(
      compileApi(oasApi({ '/users': { get: { operationId: 'getUsers' } } }, { getUsers: limit })).endpointRules,
    ).toHaveLength(1);
  });

  test('a bad or conflicting ApiDefinition is reported and the others still compile', () => {
    // the schema refuses an invalid regex, but the API server cannot (no CEL check for it): the compiler copes
    const badregex = api('badregex', {
      proxy: { listen_path: '/b/' },
      use_extended_paths: true,
      extended_paths: { rate_limit: [{ path: '/x', method: 'GET', rate: 1, per: 1 }] },
    });
    badregex.spec.extended_paths!.rate_limit[0]!.path = '(';
    const { config, problems } = compileConfig(
      [api('good', { proxy: { listen_path: '/g/' } }), api('clash', { proxy: { listen_path: '/g/' } }), badregex],
      [],
    );
    expect(config.apis.map((a) => a.name)).toEqual(['good']);
    expect(problems.map((p) => p.name).sort()).toEqual(['badregex', 'clash']);
    expect(problems.find((p) => p.name === 'badregex')!.message).toContain('spec.extended_paths.rate_limit[0].path');
  });
});

describe('the compiled config depends on the resources, not on their order', () => {
  const at = (name: string, listen: string, created: string): ApiDefinition => {
    const r = api(name, { proxy: { listen_path: listen } });
    (r.metadata as Record<string, unknown>).creationTimestamp = created;
    return r;
  };
  const pol = (name: string): Policy =>
    PolicyResource.parse({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'Policy',
      metadata: { name },
      spec: { rate: 1, per: 1 },
    });

  test('policies and APIs in any order give the same config and hash', () => {
    const apis = [
      at('a', '/a/', '2026-01-01T00:00:00Z'),
      at('b', '/b/', '2026-01-02T00:00:00Z'),
      at('c', '/c/', '2026-01-03T00:00:00Z'),
    ];
    const pols = [pol('p1'), pol('pat'), pol('pe')];
    const one = compileConfig(apis, pols).config;
    const two = compileConfig([...apis].reverse(), [pols[0]!, pols[2]!, pols[1]!]).config;
    expect(JSON.stringify(two)).toBe(JSON.stringify(one));
    expect(two.hash).toBe(one.hash);
  });

  test('of two APIs on one listen path the older wins, whichever arrives first', () => {
    const older = at('zz-older', '/same/', '2026-01-01T00:00:00Z');
    const newer = at('aa-newer', '/same/', '2026-02-01T00:00:00Z');
    for (const input of [
      [older, newer],
      [newer, older],
    ]) {
      const { config, problems } = compileConfig(input, []);
      expect(config.apis.map((x) => x.name)).toEqual(['zz-older']);
      expect(problems.map((p) => p.name)).toEqual(['aa-newer']);
    }
  });

  test('the API being served keeps its listen path and api_id against a newcomer read before it (docs/contract.md#hostile-input)', () => {
    const serving = api('orders', { proxy: { listen_path: '/orders/' } });
    const dupPath = api('00-dup', { proxy: { listen_path: '/orders/' } });
    const dupId = api('00-dup-id', { api_id: 'orders', proxy: { listen_path: '/other/' } });
    const first = compileConfig([serving], []).config;
    const { config, problems } = compileConfig([dupPath, dupId, serving], [], servingApis(first));
    expect(config.apis.map((x) => x.name)).toEqual(['orders']);
    expect(problems.map((p) => [p.name, p.conflictsWith?.metadata.name])).toEqual([
      ['00-dup', 'orders'],
      ['00-dup-id', 'orders'],
    ]);
    expect(problems[0]!.message).toMatch(/conflicts with ApiDefinition default\/orders/);
    // without a served config, the order read decides (a directory has no timestamps)
    expect(compileConfig([dupPath, serving], []).config.apis.map((x) => x.name)).toEqual(['00-dup']);
  });
});

describe('routing', () => {
  const { config } = compileConfig(
    [
      api('root', { proxy: { listen_path: '/' } }),
      api('a', { proxy: { listen_path: '/a/' } }),
      api('ab', { proxy: { listen_path: '/a/b/' } }),
    ],
    [],
  );
  test.each([
    ['/a/b/c', 'ab', '/c'],
    ['/a/x', 'a', '/x'],
    ['/a', 'a', '/'],
    ['/zzz', 'root', '/zzz'],
  ])('%s → %s with relative path %s', (path, name, rel) => {
    const r = route(config.apis, path)!;
    expect(r.api.name).toBe(name);
    expect(r.relPath).toBe(rel);
  });
});

describe('request paths are normalised before routing, checks and forwarding', () => {
  test.each([
    ['/', '/'],
    ['/a/b', '/a/b'],
    ['/a//b', '/a/b'],
    ['/files/public/../admin/secret', '/files/admin/secret'],
    ['/files/public/%2e%2e/admin/secret', '/files/admin/secret'],
    ['/files/public/%2E%2E/admin/secret', '/files/admin/secret'],
    ['/c6/%75sers', '/c6/users'],
    ['/c6/./users', '/c6/users'],
    ['/c6/users/.', '/c6/users/'],
    ['/..', '/'],
    ['/a/../../..', '/'],
    ['/.well-known/x', '/.well-known/x'],
    ['/c6/users%2F', '/c6/users%2F'], // an encoded slash is not a separator: kept
    ['/a%zz/%41', '/a%zz/A'], // an invalid escape is kept, an unreserved one decoded
    ['*', '*'],
  ])('%s → %s', (raw, normalised) => {
    expect(normalizePath(raw)).toBe(normalised);
  });
});
