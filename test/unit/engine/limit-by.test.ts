/**
 * Limits per client address or request header (docs/contract.md#limit-by), below HTTP: the schema's `limit_by` (valid
 * values, errors naming the field), its compiled form, the bucket names, and the engine counting clients
 * apart with every in-process algorithm, the LRU of max_client_buckets forgetting evicted clients, key-level
 * limits still applying, the headers of the caller's own allowance. HTTP, Redis and several gateways:
 * test/integration/limit-by.test.ts.
 */
import { AccessKeyResource, ApiDefinitionResource } from '../../../crds/kinds.js';
import { compileApi } from '../../../compiler/compile-api.js';
import { parseCompiledConfig } from '../../../contract/config-schema.js';
import { clientBucket } from '../../../contract/limits/client-bucket.js';
import type { ClientKey, CompiledApi } from '../../../contract/config.js';
import { GatewayOptions, loadGatewayOptions, type GatewayOptionsT } from '../../../lib/options.js';
import type { CheckRequest } from '../../../sidecar/engine/types.js';
import { api, count, harness, rule, session } from './fixtures.js';
const { mkdtempSync, writeFileSync, rmSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');
const { tmpdir } = process.getBuiltinModule('node:os');

const resource = (spec: unknown) => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'ApiDefinition',
  metadata: { name: 'a' },
  spec,
});

const oas = (rateLimit: unknown, opLimit?: unknown) => ({
  oas: {
    openapi: '3.0.3',
    paths: { '/login': { post: { operationId: 'login' } } },
    'x-gw-api-gateway': {
      server: { listenPath: { value: '/a/' } },
      upstream: { rateLimit },
      ...(opLimit ? { middleware: { operations: { login: { rateLimit: opLimit } } } } : {}),
    },
  },
});

describe('limit_by in the ApiDefinition schema', () => {
  test.each(['api', 'ip', 'header:X-Tenant', "header:x-a.b_c~d!#$%&'*+^`|"])('%j is accepted everywhere', (v) => {
    for (const spec of [
      { proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 1, per: 1, limit_by: v } },
      {
        proxy: { listen_path: '/a/' },
        use_extended_paths: true,
        extended_paths: { rate_limit: [{ path: '/x', method: 'GET', rate: 1, per: 1, limit_by: v }] },
      },
      oas({ rate: 1, per: '1s', limit_by: v }, { rate: 1, per: '1s', limit_by: v }),
    ])
      expect(ApiDefinitionResource.safeParse(resource(spec)).error).toBeUndefined();
  });

  const field = (spec: unknown): string[] => {
    const r = ApiDefinitionResource.safeParse(resource(spec));
    expect(r.success).toBe(false);
    return r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };
  test.each(['header:X Tenant', 'header:', 'header:a:b', 'header:X-Tenant ', 'IP', 'Api', 'cookie:session', 'ip ', ''])(
    '%j is refused, naming the field and the rule',
    (v) => {
      const msg = /must be api, ip or header:NAME, NAME an HTTP header name/;
      const g = field({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 1, per: 1, limit_by: v } });
      expect(g.join()).toMatch(/spec\.global_rate_limit\.limit_by: /);
      expect(g.join()).toMatch(msg);
      const e = field({
        proxy: { listen_path: '/a/' },
        use_extended_paths: true,
        extended_paths: { rate_limit: [{ path: '/x', method: 'GET', rate: 1, per: 1, limit_by: v }] },
      });
      expect(e.join()).toMatch(/spec\.extended_paths\.rate_limit\.0\.limit_by: must be api, ip or header/);
      const o = field(oas({ rate: 1, per: '1s' }, { rate: 1, per: '1s', limit_by: v }));
      expect(o.join()).toMatch(/x-gw-api-gateway\.middleware\.operations\.login\.rateLimit\.limit_by: must be/);
      const u = field(oas({ rate: 1, per: '1s', limit_by: v }));
      expect(u.join()).toMatch(/x-gw-api-gateway\.upstream\.rateLimit\.limit_by: must be/);
    },
  );

  test('a key-level limit has no limit_by (its client is the key)', () => {
    const r = AccessKeyResource.safeParse({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'AccessKey',
      metadata: { name: 'k' },
      spec: { key_hash: 'a'.repeat(64), rate: 1, per: 1, limit_by: 'ip' },
    });
    expect(r.success).toBe(false);
  });
});

describe('limit_by compiled', () => {
  const compile = (spec: unknown): CompiledApi => compileApi(ApiDefinitionResource.parse(resource(spec)));

  test('classic: global and per-endpoint; header names lower case; api is no client key', () => {
    const c = compile({
      proxy: { listen_path: '/a/' },
      global_rate_limit: { rate: 5, per: 60, limit_by: 'header:X-Tenant' },
      use_extended_paths: true,
      extended_paths: {
        rate_limit: [
          { path: '/login', method: 'POST', rate: 3, per: 60, limit_by: 'ip' },
          { path: '/search', method: 'GET', rate: 9, per: 60, limit_by: 'api' },
          { path: '/x', method: 'GET', rate: 9, per: 60 },
        ],
      },
    });
    expect(c.apiLimit).toEqual({ rate: 5, per: 60, by: { kind: 'header', name: 'x-tenant' } });
    expect(c.endpointRules.map((r) => r.by)).toEqual([{ kind: 'ip' }, undefined, undefined]);
    expect(
      compile({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 5, per: 60, limit_by: 'api' } }).apiLimit,
    ).toEqual({
      rate: 5,
      per: 60,
    });
  });

  test('OAS: upstream and operation limits', () => {
    const c = compile(
      oas({ rate: 9, per: '1m', limit_by: 'ip' }, { rate: 3, per: '10s', limit_by: 'header:X-Client' }),
    );
    expect(c.apiLimit).toEqual({ rate: 9, per: 60, by: { kind: 'ip' } });
    expect(c.endpointRules[0]).toMatchObject({
      id: 'POST /login',
      rate: 3,
      per: 10,
      by: { kind: 'header', name: 'x-client' },
    });
  });

  test('the compiled config carries it through a ConfigMap (gw sidecar --config reads the same schema)', () => {
    const a = compile(
      oas({ rate: 9, per: '1m', limit_by: 'ip' }, { rate: 3, per: '10s', limit_by: 'header:X-Client' }),
    );
    const parsed = parseCompiledConfig(JSON.stringify({ hash: 'h', apis: [a], policies: {} }));
    expect(parsed.ok && parsed.config.apis[0]).toEqual(a);
    for (const [by, msg] of [
      [{ kind: 'header', name: 'X-Client' }, /apis\.0\.apiLimit\.by\.name: must be lower case/],
      [{ kind: 'header', name: 'x client' }, /apis\.0\.apiLimit\.by\.name: must be an HTTP header name/],
      [{ kind: 'cookie' }, /apis\.0\.apiLimit\.by/],
    ] as const) {
      const bad = parseCompiledConfig(
        JSON.stringify({ hash: 'h', apis: [{ ...a, apiLimit: { rate: 1, per: 1, by } }], policies: {} }),
      );
      expect(bad.ok ? '' : bad.message).toMatch(msg);
    }
  });
});

describe('the gateway options of client addresses', () => {
  test('defaults', () => {
    const o = GatewayOptions.parse({});
    expect([o.trusted_proxies, o.ipv6_prefix, o.max_client_buckets]).toEqual([[], 64, 100_000]);
  });

  test('a bad trusted proxy, prefix or bound is refused at load, naming the field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-opts-'));
    try {
      const load = (yaml: string): string => {
        writeFileSync(join(dir, 'c.yaml'), yaml);
        try {
          loadGatewayOptions(join(dir, 'c.yaml'), {});
          return 'loaded';
        } catch (e) {
          return (e as Error).message;
        }
      };
      expect(load('trusted_proxies: [10.0.0.0/8, "fd00::/8", 127.0.0.1]\n')).toBe('loaded');
      expect(load('trusted_proxies: [10.0.0.0/8, 10.0.0.1/33]\n')).toMatch(
        /c\.yaml: trusted_proxies\.1: "10\.0\.0\.1\/33": the prefix length must be 0–32/,
      );
      expect(load('trusted_proxies: [proxy.local]\n')).toMatch(
        /trusted_proxies\.0: "proxy\.local" is not an IP address or CIDR block/,
      );
      expect(load('trusted_proxies: 10.0.0.0/8\n')).toMatch(/trusted_proxies: /);
      expect(load('ipv6_prefix: 129\n')).toMatch(/ipv6_prefix: /);
      expect(load('ipv6_prefix: 0\n')).toMatch(/ipv6_prefix: /);
      expect(load('max_client_buckets: 0\n')).toMatch(/max_client_buckets: /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('per-client bucket names', () => {
  const ip: ClientKey = { kind: 'ip' };
  const hd: ClientKey = { kind: 'header', name: 'x-tenant' };

  test('distinct clients, rules and kinds never share a bucket', () => {
    const names = [
      clientBucket('a:ns/api', ip, '1.2.3.4'),
      clientBucket('a:ns/api', ip, '1.2.3.5'),
      clientBucket('a:ns/api', ip, '2001:db8::/64'),
      clientBucket('a:ns/api', ip, '1.2.3.4', 'GET /x'),
      clientBucket('a:ns/api', ip, '1.2.3.4', 'GET /y'),
      clientBucket('a:ns/api', hd, '1.2.3.4'),
      clientBucket('a:ns/api', hd, ''),
      clientBucket('a:ns/api', hd, 'acme'),
      clientBucket('a:ns/api', hd, 'acme', 'GET /x'),
      clientBucket('a:ns/api', hd, 'acme:e:GET /x'), // a value that looks like a rule part
      clientBucket('a:ns/other', hd, 'acme'),
      'a:ns/api', // the shared allowance
      'a:ns/api:e:GET /x',
    ];
    expect(new Set(names).size).toBe(names.length);
  });

  test('an address is readable (escaped), a header value never appears (a credential may be in it)', () => {
    expect(clientBucket('a:ns/api', ip, '2001:db8::/64')).toBe('a:ns/api:ip:2001%3Adb8%3A%3A/64');
    expect(clientBucket('a:ns/api', ip, '1.2.3.4', 'POST /login')).toBe('a:ns/api:ip:1.2.3.4:e:POST /login');
    const b = clientBucket('a:ns/api', hd, 'secret-token-123');
    expect(b).not.toContain('secret');
    expect(b).toMatch(/^a:ns\/api:hd:[A-Za-z0-9_-]{43}$/);
    // bounded length whatever the value
    expect(clientBucket('a:ns/api', hd, 'x'.repeat(10_000)).length).toBe(b.length);
  });
});

describe('the engine counts clients apart (every in-process algorithm)', () => {
  const algorithms: [string, Partial<GatewayOptionsT>][] = [
    ['DRL', { drl_threshold: 0 }],
    ['sliding log', { enable_kv_rolling_limiter: true }],
    ['sentinel', { enable_sentinel_rate_limiter: true }],
    ['fixed window', { enable_fixed_window_rate_limiter: true }],
  ];
  const from = (a: CompiledApi, client: string, extra: Partial<CheckRequest> = {}): CheckRequest => ({
    api: a,
    method: 'GET',
    path: '/',
    client: () => client,
    ...extra,
  });

  test.each(algorithms)('%s: each client its own allowance; its headers are its own', async (_name, o) => {
    const h = harness(o);
    const a = api('a', { keyless: true, apiLimit: { rate: 3, per: 60, by: { kind: 'ip' } } });
    expect(await h.fire(4, from(a, '127.0.0.2'))).toEqual(['allow', 'allow', 'allow', 'api_limited']);
    const first = await h.engine.check(from(a, '127.0.0.3'));
    expect(first).toMatchObject({ kind: 'allow', headers: { limit: 3, remaining: 2 } });
    expect(await h.fire(3, from(a, '127.0.0.3'))).toEqual(['allow', 'allow', 'api_limited']);
    const refused = await h.engine.check(from(a, '127.0.0.2'));
    expect(refused).toMatchObject({ kind: 'api_limited', headers: { limit: 3, remaining: 0 } });
    expect(refused.kind === 'api_limited' && refused.retryAfter).toBeGreaterThanOrEqual(1);
  });

  test('header: one allowance per value; a missing header is the empty value', async () => {
    const h = harness();
    const by: ClientKey = { kind: 'header', name: 'x-tenant' };
    const a = api('a', { keyless: true, endpointRules: [{ ...rule('*', '^/?.*$', 2, 60), by }] });
    expect(count(await h.fire(3, from(a, 'acme')), 'allow')).toBe(2);
    expect(count(await h.fire(3, from(a, 'globex')), 'allow')).toBe(2);
    expect(count(await h.fire(3, from(a, '')), 'allow')).toBe(2);
    // a request whose CheckRequest cannot tell the client: the empty value's allowance, used up above
    expect((await h.engine.check({ api: a, method: 'GET', path: '/' })).kind).toBe('api_limited');
  });

  test('key-level limits still apply to every client of a keyed API; an API-level refusal consumes none', async () => {
    const h = harness();
    const a = api('a', { apiLimit: { rate: 2, per: 60, by: { kind: 'ip' } } });
    const key = session({ rate: 3, per: 60 });
    const k = { keyHash: 'k'.repeat(64), session: key };
    expect(await h.fire(3, from(a, '10.0.0.1', k))).toEqual(['allow', 'allow', 'api_limited']);
    // the key has used 2 of its 3: a second client gets one, then the key's own limit
    expect(await h.fire(2, from(a, '10.0.0.2', k))).toEqual(['allow', 'key_limited']);
  });

  test.each(algorithms)(
    '%s: at most max_client_buckets clients in process; an evicted one is forgotten',
    async (_name, o) => {
      const h = harness({ ...o, max_client_buckets: 2 });
      const a = api('a', { keyless: true, apiLimit: { rate: 1, per: 60, by: { kind: 'header', name: 'x-t' } } });
      expect(await h.fire(2, from(a, 'A'))).toEqual(['allow', 'api_limited']);
      expect(await h.fire(1, from(a, 'B'))).toEqual(['allow']);
      expect(await h.fire(2, from(a, 'A'))).toEqual(['api_limited', 'api_limited']); // A is the most recent
      expect(await h.fire(1, from(a, 'C'))).toEqual(['allow']); // evicts B, the least recently used
      expect(h.engine.clientBuckets()).toBe(2);
      expect(await h.fire(1, from(a, 'A'))).toEqual(['api_limited']);
      // B was forgotten with its bucket: it starts afresh (only a store keeps a forgotten client's count)
      expect(await h.fire(1, from(a, 'B'))).toEqual(['allow']);
      for (let i = 0; i < 1000; i++) await h.engine.check(from(a, `rot-${i}`));
      expect(h.engine.clientBuckets()).toBe(2);
    },
  );

  test('evictions are reported', async () => {
    let evicted = 0;
    const h = harness({ max_client_buckets: 10 }, undefined, { onClientBucketEvicted: () => evicted++ });
    const a = api('a', { keyless: true, apiLimit: { rate: 100, per: 60, by: { kind: 'ip' } } });
    for (let i = 0; i < 25; i++) await h.engine.check(from(a, `10.0.0.${i}`));
    expect(evicted).toBe(15);
  });

  test('APIs without limit_by make no client bucket and never ask for the client', async () => {
    const h = harness();
    const a = api('a', {
      keyless: true,
      apiLimit: { rate: 100, per: 60 },
      endpointRules: [rule('GET', '^/?x$', 5, 60)],
    });
    const ask = (): string => {
      throw new Error('asked');
    };
    await h.engine.check({ api: a, method: 'GET', path: '/', client: ask });
    await h.engine.check({ api: a, method: 'GET', path: '/x', client: ask });
    expect(h.engine.clientBuckets()).toBe(0);
  });
});
