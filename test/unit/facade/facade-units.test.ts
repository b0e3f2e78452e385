/** Facade building blocks without HTTP: the limiter, URL checks, origins, session mapping, the dir backend. */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { AccessKeyResource, OAuthClientResource, SecretResource } from '../../../crds/kinds.js';
import { DirBackend } from '../../../facade/backend-dir.js';
import { clientResourceName, ConflictError, keyResourceName } from '../../../facade/backend.js';
import { apiIdOf } from '../../../crds/schemas/api-definition.js';
import { facadeOpenApi } from '../../../facade/openapi.js';
import { FacadeLimiter } from '../../../facade/rate-limit.js';
import { ManualClock } from '../../../lib/clock.js';
import { normalizeSession } from '../../../facade/routes-keys.js';
import { checkProxyUrl, normalizeOrigin } from '../../../facade/routes-proxy.js';
import { allowedOrigins } from '../../../facade/server.js';
import { HttpError } from '../../../lib/http/http-util.js';
import { emptySnapshot, toSnapshot } from '../../../compiler/snapshot.js';
import { loadManifestDir } from '../../../standalone/manifests.js';
import { sha256hex } from '../../../lib/hash.js';

describe('FacadeLimiter (the gateway sliding window log)', () => {
  test('admits exactly rate per trailing window, per client; tells when the next one fits', () => {
    const clock = new ManualClock(10_000);
    const l = new FacadeLimiter({ rate: 3, per: 1 }, clock);
    expect([l.take('a'), l.take('a'), l.take('a')]).toEqual([undefined, undefined, undefined]);
    clock.advance(400);
    expect(l.take('a')).toBe(1); // 0.6 s until the first admission leaves the window, in whole seconds
    expect(l.take('b')).toBeUndefined(); // per client
    clock.advance(600); // the three admissions at 10_000 left the window; the refusal at 10_400 did not
    expect([l.take('a'), l.take('a')]).toEqual([undefined, undefined]);
    expect(l.take('a')).toBe(1);
  });
  test('spike arrest: a client that keeps sending while refused stays refused', () => {
    const clock = new ManualClock(0);
    const l = new FacadeLimiter({ rate: 2, per: 1 }, clock);
    expect([l.take('x'), l.take('x')]).toEqual([undefined, undefined]);
    for (let i = 0; i < 30; i++) {
      clock.advance(100); // 10 per second against 2 per second, for 3 s
      expect(l.take('x')).toBeGreaterThanOrEqual(1);
    }
    clock.advance(1000); // a whole quiet window
    expect(l.take('x')).toBeUndefined();
  });
});

describe('proxy URL checks', () => {
  const allowed = new Set(['http://127.0.0.1:8080', 'https://gw.example']);
  const refused: [string, RegExp][] = [
    ['http://127.0.0.1:8081/', /not a gateway URL/],
    ['http://localhost:8080/', /not a gateway URL/],
    ['https://127.0.0.1:8080/', /not a gateway URL/],
    ['http://gw.example/', /not a gateway URL/],
    ['https://gw.example.evil.com/', /not a gateway URL/],
    ['https://evil.com#https://gw.example/', /not a gateway URL/],
    ['http://a:b@127.0.0.1:8080/', /credentials/],
    ['http://127.0.0.1:8080@evil.com/', /credentials/],
    ['ftp://127.0.0.1:8080/', /scheme/],
    ['gopher://127.0.0.1:8080/', /scheme/],
    ['javascript:alert(1)', /scheme/],
    ['127.0.0.1:8080/x', /scheme|absolute/],
    ['//127.0.0.1:8080/x', /absolute/],
  ];
  test.each(refused)('%s → 400', (url, msg) => {
    let err: unknown;
    try {
      checkProxyUrl(url, allowed);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HttpError);
    expect((err as HttpError).status).toBe(400);
    expect((err as HttpError).message).toMatch(msg);
  });
  test.each(['http://127.0.0.1:8080/pets?x=1', 'https://GW.example:443/a', 'https://gw.example/%2e%2e/x'])(
    '%s is allowed',
    (url) => {
      expect(checkProxyUrl(url, allowed).origin).toMatch(/^(http:\/\/127\.0\.0\.1:8080|https:\/\/gw\.example)$/);
    },
  );
  test('origins are normalised (case, default port) and wildcard listen hosts mean loopback', () => {
    expect(normalizeOrigin('HTTP://GW.example:80/path')).toBe('http://gw.example');
    expect(normalizeOrigin('ftp://x')).toBeUndefined();
    expect([...allowedOrigins(undefined, ['http://0.0.0.0:8080'])].sort()).toEqual(
      ['http://0.0.0.0:8080', 'http://127.0.0.1:8080', 'http://[::1]:8080', 'http://localhost:8080'].sort(),
    );
    // a loopback listen address: the other loopback names reach it too (http://localhost:PORT in a script)
    expect([...allowedOrigins(undefined, ['http://127.0.0.1:8080'])].sort()).toEqual([
      'http://127.0.0.1:8080',
      'http://localhost:8080',
    ]);
    expect([...allowedOrigins(undefined, ['http://[::1]:8080'])].sort()).toEqual([
      'http://[::1]:8080',
      'http://localhost:8080',
    ]);
    expect([...allowedOrigins(undefined, ['http://10.0.0.5:8080'])]).toEqual(['http://10.0.0.5:8080']);
    // explicit gateway_urls replace the default and are taken literally
    expect([...allowedOrigins(['http://0.0.0.0:9'], ['http://127.0.0.1:8080'])]).toEqual(['http://0.0.0.0:9']);
    expect(() => allowedOrigins(['ftp://x'], [])).toThrow(/gateway_urls/);
  });
});

describe('normalizeSession', () => {
  test('maps deprecated fields and drops them', () => {
    expect(normalizeSession({ apply_policy_id: 'p', enable_detail_recording: true })).toEqual({
      apply_policies: ['p'],
      enable_detailed_recording: true,
    });
    expect(normalizeSession({ apply_policy_id: 'p', apply_policies: ['q'] })).toEqual({ apply_policies: ['q'] });
    expect(normalizeSession({ apply_policy_id: '' })).toEqual({});
    expect(normalizeSession({ enable_detail_recording: true, enable_detailed_recording: false })).toEqual({
      enable_detailed_recording: false,
    });
  });
});

describe('DirBackend', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-dirb-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const snap = () => toSnapshot(loadManifestDir(dir).resources.map((r) => r.resource));

  test('keys: manifest per key, schema-valid, raw key never written; annotation for suppress_reset', async () => {
    let writes = 0;
    const b = new DirBackend({ dir, snapshot: snap, onWrite: () => void writes++ });
    const h = sha256hex('raw');
    await b.putKey(h, {
      namespace: 'team-a',
      name: keyResourceName(h),
      spec: { rate: 1, per: 2 },
      suppressReset: true,
    });
    expect(writes).toBe(1);
    const file = join(dir, '.gw', `accesskey-key-${h.slice(0, 16)}.yaml`);
    const k = AccessKeyResource.parse(parse(readFileSync(file, 'utf8')));
    expect(k.metadata).toMatchObject({
      name: `key-${h.slice(0, 16)}`,
      namespace: 'team-a',
      annotations: { 'gw.io/suppress-reset': 'true' },
    });
    expect(k.spec).toEqual({ rate: 1, per: 2, key_hash: h });
    expect(await b.getKey(h)).toEqual({
      namespace: 'team-a',
      name: `key-${h.slice(0, 16)}`,
      spec: { rate: 1, per: 2 },
      suppressReset: true,
    });
    expect(await b.listKeys()).toEqual([h]);
    expect(await b.deleteKey(h)).toBe(true);
    expect(await b.deleteKey(h)).toBe(false);
    expect(await b.getKey(h)).toBeUndefined();
  });

  test("a kept key index answers the facade's lookups: a write does not go through every key of the directory", async () => {
    writeFileSync(
      join(dir, 'keys.yaml'),
      `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: hand}\nspec: {key_hash: ${'d'.repeat(64)}}\n`,
    );
    const real = snap();
    const hand = real.keys[0]!;
    let walked = 0;
    // the snapshot's key list counts every read of an element or its length
    const counted = { ...real, keys: new Proxy(real.keys, { get: (t, p, r) => (walked++, Reflect.get(t, p, r)) }) };
    const index = new Map([['d'.repeat(64), hand]]);
    const b = new DirBackend({ dir, snapshot: () => counted, keyIndex: (s) => (s === counted ? index : undefined) });
    expect(await b.getKey('d'.repeat(64))).toMatchObject({ name: 'hand' });
    await expect(
      b.putKey('d'.repeat(64), { namespace: 'default', name: 'x', spec: {}, suppressReset: false }),
    ).rejects.toBeInstanceOf(ConflictError);
    const own = 'e'.repeat(64);
    await b.putKey(own, { namespace: 'default', name: keyResourceName(own), spec: {}, suppressReset: false });
    expect(walked).toBe(0);
    // no index for this snapshot: the snapshot's keys are indexed here, with the same answers
    const plain = new DirBackend({ dir, snapshot: () => counted, keyIndex: () => undefined });
    expect(await plain.getKey('d'.repeat(64))).toMatchObject({ name: 'hand' });
    expect(walked).toBeGreaterThan(0);
  });

  test('the same 16-hex prefix for another hash is a conflict, not an overwrite', async () => {
    const b = new DirBackend({ dir, snapshot: emptySnapshot });
    const h1 = 'ab'.repeat(32);
    const h2 = `${'ab'.repeat(8)}${'cd'.repeat(24)}`;
    await b.putKey(h1, { namespace: 'default', name: keyResourceName(h1), spec: {}, suppressReset: false });
    await expect(
      b.putKey(h2, { namespace: 'default', name: keyResourceName(h2), spec: {}, suppressReset: false }),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await b.getKey(h2)).toBeUndefined();
  });

  test('clients: Secret (mode 600) + OAuthClient, both schema-valid; delete removes both', async () => {
    writeFileSync(
      join(dir, 'api.yaml'),
      'apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: a, namespace: ns1}\nspec: {proxy: {listen_path: /a/}}\n',
    );
    const b = new DirBackend({ dir, snapshot: snap });
    const api = await b.getApi(undefined, 'a');
    expect(api).toEqual({ namespace: 'ns1', name: 'a', apiId: 'a' });
    expect(await b.getApi('other', 'a')).toBeUndefined();
    expect(await b.missingApis(api!.namespace, ['a', 'ghost'])).toEqual(['ghost']);
    const name = clientResourceName('ns1', 'a', 'c1');
    await b.putClient({
      namespace: 'ns1',
      name,
      secret: 's3',
      spec: { api_id: 'a', client_id: 'c1', secretRef: { name: `${name}-secret`, key: 'secret' } },
    });
    const secretFile = join(dir, '.gw', `secret-ns1-${name}-secret.yaml`);
    expect(statSync(secretFile).mode & 0o777).toBe(0o600);
    SecretResource.parse(parse(readFileSync(secretFile, 'utf8')));
    OAuthClientResource.parse(parse(readFileSync(join(dir, '.gw', `oauthclient-${name}.yaml`), 'utf8')));
    expect((await b.getClient('a', 'c1'))?.secret).toBe('s3');
    expect(loadManifestDir(dir).errors).toEqual([]);
    expect(await b.deleteClient('a', 'c1')).toBe(true);
    expect(loadManifestDir(dir).resources.length).toBe(1);
  });

  test('hand-written clients are listed with their Secret but refused for writes', async () => {
    mkdirSync(join(dir, 'm'));
    writeFileSync(
      join(dir, 'm', 'client.yaml'),
      'apiVersion: v1\nkind: Secret\nmetadata: {name: cs}\nstringData: {secret: hand}\n---\napiVersion: gw.io/v1alpha1\nkind: OAuthClient\nmetadata: {name: c}\nspec: {api_id: a, client_id: hc, secretRef: {name: cs, key: secret}}\n',
    );
    const b = new DirBackend({ dir, snapshot: snap });
    expect((await b.getClient('a', 'hc'))?.secret).toBe('hand');
    await expect(b.deleteClient('a', 'hc')).rejects.toBeInstanceOf(ConflictError);
    await expect(
      b.putClient({
        namespace: 'default',
        name: 'x',
        secret: 'y',
        spec: { api_id: 'a', client_id: 'hc', secretRef: { name: 'x-secret', key: 'secret' } },
      }),
    ).rejects.toBeInstanceOf(ConflictError);
  });

  test('apiIdOf follows the compiler: OAS info.id, then spec.api_id, then metadata.name', () => {
    const base = {
      apiVersion: 'gw.io/v1alpha1' as const,
      kind: 'ApiDefinition' as const,
      metadata: { name: 'n', namespace: 'default' },
    };
    const spec = {
      active: true,
      use_keyless: false,
      use_oauth2: false,
      disable_rate_limit: false,
      use_extended_paths: false,
      proxy: { listen_path: '/', strip_listen_path: true },
    };
    expect(apiIdOf({ ...base, spec })).toBe('n');
    expect(apiIdOf({ ...base, spec: { ...spec, api_id: 'x' } })).toBe('x');
  });
});

describe('OpenAPI document', () => {
  test('3.1, every operation documents its responses, every $ref resolves', () => {
    expect(facadeOpenApi.openapi).toBe('3.1.0');
    const text = JSON.stringify(facadeOpenApi);
    const schemas = (facadeOpenApi.components as { schemas: Record<string, unknown> }).schemas;
    for (const m of text.matchAll(/"\$ref":"#\/components\/schemas\/(\w+)"/g)) expect(schemas).toHaveProperty(m[1]!);
    for (const [path, item] of Object.entries(facadeOpenApi.paths as Record<string, Record<string, unknown>>)) {
      for (const [method, op] of Object.entries(item)) {
        if (method === 'parameters') continue;
        expect([path, Object.keys((op as { responses: object }).responses).length > 0]).toEqual([path, true]);
      }
    }
    // the key body schema is the validating zod schema: strict, with the deprecated fields
    const ks = schemas.KeySession as { additionalProperties: boolean; properties: Record<string, unknown> };
    expect(ks.additionalProperties).toBe(false);
    expect(ks.properties).toHaveProperty('apply_policy_id');
    expect(Object.keys(ks.properties).length).toBe(38); // the fields of docs/contract.md#key-body
  });
});
