/**
 * Braces in path patterns are read one way only (lib/path-pattern.ts): `{name}` is a wildcard, `{n}`,
 * `{n,}`, `{n,m}` are counted quantifiers for the linear-time matcher, anything else is refused at load
 * with the field named. A quantifier read as a wildcard widened allowed_urls and endpoint rules.
 */
import { ApiDefinitionResource, type ApiDefinition } from '../../crds/kinds.js';
import { compileApi } from '../../compiler/compile-api.js';
import { AccessKeySpec } from '../../crds/schemas/access-key.js';
import { PolicySpec } from '../../crds/schemas/policy.js';
import { ApiDefinitionSpec } from '../../crds/schemas/api-definition.js';
import type { AccessDefinitionT } from '../../crds/schemas/access-definition.js';
import { endpointPattern, endpointPatternProblem, oasPathPattern } from '../../lib/path-pattern.js';
import { accessAllowed } from '../../sidecar/proxy/auth.js';
import { matchApiRule, matchKeyEndpoint } from '../../contract/limits/endpoint-match.js';

const api = (name: string, spec: unknown): ApiDefinition =>
  ApiDefinitionResource.parse({ apiVersion: 'gw.io/v1alpha1', kind: 'ApiDefinition', metadata: { name }, spec });

const classic = (path: string): ApiDefinition =>
  api('q', {
    proxy: { listen_path: '/q/', target_url: 'http://127.0.0.1:1' },
    use_extended_paths: true,
    extended_paths: { rate_limit: [{ path, method: 'GET', rate: 1, per: 1 }] },
  });

describe('counted quantifiers in path patterns', () => {
  test('allowed_urls /v[0-9]{2}/.* admits /v12/y only', () => {
    const c = compileApi(classic('.*'));
    const rights: Record<string, AccessDefinitionT> = {
      [c.api_id]: { allowed_urls: [{ url: '/v[0-9]{2}/.*', methods: ['GET'] }] },
    };
    expect(accessAllowed(rights, c, 'GET', '/v12/y')).toBe(true);
    expect(accessAllowed(rights, c, 'GET', '/v1/y')).toBe(false);
    expect(accessAllowed(rights, c, 'GET', '/v1234/y')).toBe(false);
  });

  test('a classic endpoint rule /v[0-9]{2}/x does not count /v123/x', () => {
    const c = compileApi(classic('/v[0-9]{2}/x'));
    expect(matchApiRule(c, 'GET', '/v12/x')?.id).toBe('GET /v[0-9]{2}/x');
    expect(matchApiRule(c, 'GET', '/v123/x')).toBeUndefined();
    expect(matchApiRule(c, 'GET', '/v1/x')).toBeUndefined();
  });

  test("a key's or policy's endpoint /v[0-9]{2,3}/x counts /v12/x and /v123/x, not /v1234/x", () => {
    const def: AccessDefinitionT = {
      endpoints: [{ path: '/v[0-9]{2,3}/x', methods: [{ name: 'GET', limit: { rate: 1, per: 1 } }] }],
    };
    expect(matchKeyEndpoint(def, 'GET', '/v12/x')).toBeDefined();
    expect(matchKeyEndpoint(def, 'GET', '/v123/x')).toBeDefined();
    expect(matchKeyEndpoint(def, 'GET', '/v1234/x')).toBeUndefined();
    expect(matchKeyEndpoint(def, 'GET', '/v1/x')).toBeUndefined();
  });

  test('the compiled forms: quantifiers kept, wildcards expanded; /.*a.{20} is refused as too complex, not widened', () => {
    expect(endpointPattern('/v[0-9]{2}/.*')).toBe('^/?(?:v[0-9]{2}/.*)/?$');
    expect(endpointPattern('/a{2,}/{id}')).toBe('^/?(?:a{2,}/.*)/?$');
    expect(endpointPattern('/users/{user_id}/{_x9}')).toBe('^/?(?:users/.*/.*)/?$');
    expect(endpointPattern('/[{]x\\{id\\}')).toBe('^/?(?:[{]x\\{id\\})/?$');
    expect(endpointPattern('/.*a.{3}')).toBe('^/?(?:.*a.{3})/?$');
    expect(() => endpointPattern('/.*a.{20}')).toThrow(/too complex/);
  });

  test.each(['/a/{user-id}', '/a/{ 2}', '/a{,5}', '/a/{}', '/a/{2x}', '/a/{id', '/a/id}', '/a/{x/y}'])(
    '%s is refused, naming the rule',
    (path) => {
      expect(endpointPatternProblem(path)).toMatch(/wildcard .*quantifier|without its/);
    },
  );

  test('every pattern field refuses an ambiguous brace with the field named', () => {
    const classicSpec = ApiDefinitionSpec.safeParse({
      proxy: { listen_path: '/x/' },
      use_extended_paths: true,
      extended_paths: { rate_limit: [{ path: '/a/{user-id}', method: 'GET', rate: 1, per: 1 }] },
    });
    expect(classicSpec.success).toBe(false);
    expect(classicSpec.error!.issues[0]!.path).toEqual(['extended_paths', 'rate_limit', 0, 'path']);
    expect(classicSpec.error!.issues[0]!.message).toMatch(/\{name\} wildcard/);

    const rights = {
      a: {
        allowed_urls: [{ url: '/v{,2}', methods: ['GET'] }],
        endpoints: [{ path: '/e/{}', methods: [{ name: 'GET', limit: { rate: 1, per: 1 } }] }],
      },
    };
    for (const schema of [AccessKeySpec, PolicySpec]) {
      const r = schema.safeParse({ access_rights: rights });
      expect(r.success).toBe(false);
      const paths = r.error!.issues.map((i) => i.path.join('.'));
      expect(paths).toEqual(
        expect.arrayContaining(['access_rights.a.allowed_urls.0.url', 'access_rights.a.endpoints.0.path']),
      );
    }
  });

  test('OAS paths: {name} (with - and .) is a wildcard; {2}, {} and a lone brace are refused, naming the operation', () => {
    expect(oasPathPattern('/items/{item-id}/{v.1}')).toBe('^/?(?:items/.*/.*)/?$');
    expect(() => oasPathPattern('/v{2}')).toThrow(/parameter name/);
    expect(() => oasPathPattern('/v/{}')).toThrow(/parameter name/);
    expect(() => oasPathPattern('/v/x}')).toThrow(/without its pair/);
    const oas = (path: string) =>
      api('o', {
        oas: {
          openapi: '3.0.3',
          paths: { [path]: { get: { operationId: 'op' } } },
          'x-gw-api-gateway': {
            info: { id: 'o' },
            server: { listenPath: { value: '/o/' } },
            middleware: { operations: { op: { rateLimit: { enabled: true, rate: 1, per: '1s' } } } },
          },
        },
      });
    expect(() => compileApi(oas('/v{2}/x'))).toThrow(/middleware\.operations\.op\.rateLimit.*parameter name/);
    const ok = compileApi(oas('/v/{id}'));
    expect(matchApiRule(ok, 'GET', '/v/7')).toBeDefined();
  });
});
