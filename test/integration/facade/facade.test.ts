/** The management facade over a real resources directory: OAuth clients, keys, errors, limits, persistence. */
import { buildInfo } from '../../../lib/build-info.js';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { parse } from 'yaml';
import { AccessKeyResource, OAuthClientResource, SecretResource, secretValue } from '../../../crds/kinds.js';
import { sha256hex } from '../../../lib/hash.js';
import { loadManifestDir } from '../../../standalone/manifests.js';
import { conformance, SECRET, startFacade, TOKEN, type Facade } from './helpers.js';

let f: Facade;
beforeAll(async () => {
  f = await startFacade();
});
afterAll(async () => {
  await f.close();
});

const gwDir = (): string => join(f.dir, '.gw');
const readYaml = (file: string): unknown => parse(readFileSync(join(gwDir(), file), 'utf8'));

describe('OAuth clients', () => {
  test('create with everything generated: 200 with the client object, 128-bit+ id and secret', async () => {
    const r = await f.call('POST', '/api/apis/oauth/pets', { body: {} });
    expect(r.status).toBe(200);
    const c = r.body as Record<string, unknown>;
    expect(Object.keys(c).sort()).toEqual(
      [
        'client_id',
        'client_name',
        'dcr_registration',
        'description',
        'meta_data',
        'policy_id',
        'redirect_uri',
        'secret',
      ].sort(),
    );
    expect(c.client_id).toMatch(/^[0-9a-f]{32}$/);
    expect(Buffer.from(c.secret as string, 'base64url').length).toBeGreaterThanOrEqual(16);
    expect(c.meta_data).toEqual({});
    expect(c.dcr_registration).toEqual({ access_token: '', client_uri: '', provider: '' });
  });

  test('an empty client_id or secret counts as not supplied: both generated', async () => {
    const r = await f.call('POST', '/api/apis/oauth/pets', { body: { client_id: '', secret: '' } });
    expect(r.status).toBe(200);
    const c = r.body as Record<string, unknown>;
    expect(c.client_id).toMatch(/^[0-9a-f]{32}$/);
    expect(Buffer.from(c.secret as string, 'base64url').length).toBeGreaterThanOrEqual(16);
    expect((await f.call('DELETE', `/api/apis/oauth/pets/${c.client_id as string}`)).status).toBe(200); // the later tests count clients
  });

  test('create with supplied fields: they come back; stored as OAuthClient + Secret manifests', async () => {
    const body = {
      api_id: 'pets',
      api_model: {},
      client_id: 'my-client',
      client_name: 'My client',
      description: 'for tests',
      meta_data: { team: 'blue' },
      policy_id: 'gold',
      redirect_uri: 'https://app.example/cb',
      secret: 'sup3r-s3cret',
    };
    const r = await f.call('POST', '/api/apis/oauth/pets', { body });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      client_id: 'my-client',
      client_name: 'My client',
      description: 'for tests',
      meta_data: { team: 'blue' },
      policy_id: 'gold',
      redirect_uri: 'https://app.example/cb',
      secret: 'sup3r-s3cret',
    });
    const files = readdirSync(gwDir());
    const clientFile = files.find(
      (x) => x.startsWith('oauthclient-') && readFileSync(join(gwDir(), x), 'utf8').includes('my-client'),
    )!;
    const client = OAuthClientResource.parse(readYaml(clientFile));
    expect(client.spec).toMatchObject({ api_id: 'pets', client_id: 'my-client', policy_id: 'gold' });
    const secretFile = files.find((x) => x === `secret-default-${client.spec.secretRef.name}.yaml`)!;
    const secret = SecretResource.parse(readYaml(secretFile));
    expect(secretValue(secret, client.spec.secretRef.key)).toBe('sup3r-s3cret');
    expect(readFileSync(join(gwDir(), clientFile), 'utf8')).not.toContain('sup3r-s3cret');
    expect(f.logs.join('')).not.toContain('sup3r-s3cret');
  });

  test('duplicate client_id → 409; unknown field → 400 naming it; missing policy → 400; api_id mismatch → 400', async () => {
    expect((await f.call('POST', '/api/apis/oauth/pets', { body: { client_id: 'my-client' } })).status).toBe(409);
    const unknown = await f.call('POST', '/api/apis/oauth/pets', { body: { colour: 'red' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ status: 'error', message: expect.stringContaining('colour') });
    const pol = await f.call('POST', '/api/apis/oauth/pets', { body: { policy_id: 'nope' } });
    expect(pol.status).toBe(400);
    expect((pol.body as { message: string }).message).toMatch(/^policy_id: /);
    const typ = await f.call('POST', '/api/apis/oauth/pets', { body: { client_name: 5 } });
    expect(typ.status).toBe(400);
    expect((typ.body as { message: string }).message).toMatch(/^client_name: /);
    expect((await f.call('POST', '/api/apis/oauth/pets', { body: { api_id: 'other' } })).status).toBe(400);
  });

  test('unknown API → 404 (create, list, get, delete)', async () => {
    expect((await f.call('POST', '/api/apis/oauth/nope', { body: {} })).status).toBe(404);
    expect((await f.call('GET', '/api/apis/oauth/nope')).status).toBe(404);
    expect((await f.call('GET', '/api/apis/oauth/nope/x')).status).toBe(404);
    expect((await f.call('DELETE', '/api/apis/oauth/nope/x')).status).toBe(404);
  });

  test('list omits secrets; get one includes it; delete removes client and Secret; then 404', async () => {
    const list = await f.call('GET', '/api/apis/oauth/pets');
    expect(list.status).toBe(200);
    const items = list.body as Record<string, unknown>[];
    expect(items.length).toBe(2);
    for (const i of items) expect(i).not.toHaveProperty('secret');
    const one = await f.call('GET', '/api/apis/oauth/pets/my-client');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ client_id: 'my-client', secret: 'sup3r-s3cret' });
    const del = await f.call('DELETE', '/api/apis/oauth/pets/my-client');
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ key: 'my-client', action: 'deleted', status: 'ok' });
    expect(readdirSync(gwDir()).join(' ')).not.toMatch(/-secret\.yaml.*-secret\.yaml/); // one client's Secret left
    expect((await f.call('GET', '/api/apis/oauth/pets/my-client')).status).toBe(404);
    expect((await f.call('DELETE', '/api/apis/oauth/pets/my-client')).status).toBe(404);
    expect(((await f.call('GET', '/api/apis/oauth/pets')).body as unknown[]).length).toBe(1);
  });

  test('a client id with reserved characters works through percent-encoding', async () => {
    expect((await f.call('POST', '/api/apis/oauth/pets', { body: { client_id: 'a/b?c' } })).status).toBe(200);
    const one = await f.call('GET', `/api/apis/oauth/pets/${encodeURIComponent('a/b?c')}`);
    expect(one.status).toBe(200);
    expect((await f.call('DELETE', `/api/apis/oauth/pets/${encodeURIComponent('a/b?c')}`)).status).toBe(200);
  });
});

describe('credentials', () => {
  test('bearer: missing → 401, not Bearer → 401, wrong → 403, second configured token accepted', async () => {
    expect((await f.call('GET', '/api/apis/oauth/pets', { noAuth: true })).status).toBe(401);
    expect(
      (await f.call('GET', '/api/apis/oauth/pets', { noAuth: true, headers: { authorization: `Basic ${TOKEN}` } }))
        .status,
    ).toBe(401);
    const wrong = await f.call('GET', '/api/apis/oauth/pets', {
      noAuth: true,
      headers: { authorization: 'Bearer wrong' },
    });
    expect(wrong.status).toBe(403);
    expect(wrong.body).toEqual({ status: 'error', message: expect.any(String) });
    expect(
      (await f.call('GET', '/api/apis/oauth/pets', { noAuth: true, headers: { authorization: 'Bearer other-token' } }))
        .status,
    ).toBe(200);
    // a prefix of the token is wrong too
    expect(
      (
        await f.call('GET', '/api/apis/oauth/pets', {
          noAuth: true,
          headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
        })
      ).status,
    ).toBe(403);
  });

  test('X-Gw-Authorization: missing → 401, wrong → 403; the bearer token is not a substitute', async () => {
    expect((await f.call('GET', '/gw/keys', { noAuth: true })).status).toBe(401);
    expect((await f.call('GET', '/gw/keys', { noAuth: true, headers: { 'x-gw-authorization': 'nope' } })).status).toBe(
      403,
    );
    expect((await f.call('GET', '/gw/keys', { noAuth: true, headers: { 'x-gw-authorization': TOKEN } })).status).toBe(
      403,
    );
    expect(
      (await f.call('GET', '/gw/keys', { noAuth: true, headers: { authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(401);
    expect(
      (await f.call('GET', '/api/apis/oauth/pets', { noAuth: true, headers: { 'x-gw-authorization': SECRET } })).status,
    ).toBe(401);
  });

  test('credential checked before the API lookup (no API enumeration without a token)', async () => {
    expect((await f.call('GET', '/api/apis/oauth/nope', { noAuth: true })).status).toBe(401);
  });
});

describe('keys', () => {
  const KEY = 'my-raw-key-abcdef';
  const HASH = sha256hex(KEY);

  test('POST adds: 200 {key, key_hash, action: added, status: ok}; AccessKey manifest with the hash only', async () => {
    const r = await f.call('POST', `/gw/keys/${KEY}`, {
      body: { rate: 10, per: 60, quota_max: 100, apply_policies: ['gold'], meta_data: { org: 'x' } },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ key: KEY, key_hash: HASH, action: 'added', status: 'ok' });
    const file = `accesskey-key-${HASH.slice(0, 16)}.yaml`;
    const text = readFileSync(join(gwDir(), file), 'utf8');
    expect(text).not.toContain(KEY);
    const k = AccessKeyResource.parse(parse(text));
    expect(k.metadata.name).toBe(`key-${HASH.slice(0, 16)}`);
    expect(k.spec).toMatchObject({ key_hash: HASH, rate: 10, per: 60, apply_policies: ['gold'] });
    expect(k.metadata.annotations?.['gw.io/suppress-reset']).toBeUndefined();
    expect(f.logs.join('')).not.toContain(KEY);
  });

  test('the key is in the resources snapshot at once (usable by the gateway)', () => {
    expect(f.source.current().keys.some((k) => k.spec.key_hash === HASH)).toBe(true);
  });

  test('POST again → modified; suppress_reset=1 recorded as annotation', async () => {
    const r = await f.call('POST', `/gw/keys/${KEY}?suppress_reset=1`, { body: { rate: 20, per: 60 } });
    expect(r.body).toEqual({ key: KEY, key_hash: HASH, action: 'modified', status: 'ok' });
    const k = AccessKeyResource.parse(readYaml(`accesskey-key-${HASH.slice(0, 16)}.yaml`));
    expect(k.metadata.annotations).toEqual({ 'gw.io/suppress-reset': 'true' });
    expect(k.spec.rate).toBe(20);
    expect(k.spec.apply_policies).toBeUndefined(); // POST replaces the session
  });

  test('concurrent POSTs of one new key: exactly one "added"', async () => {
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => f.call('POST', '/gw/keys/racy-key', { body: { rate: i, per: 1 } })),
    );
    const actions = rs.map((r) => (r.body as { action: string }).action).sort();
    expect(actions).toEqual(['added', ...Array(7).fill('modified')]);
    expect((await f.call('DELETE', '/gw/keys/racy-key')).status).toBe(200);
  });

  test('suppress_reset other than 1 → 400; hashed other than true/false → 400', async () => {
    for (const v of ['0', 'true', '']) {
      const r = await f.call('POST', `/gw/keys/${KEY}?suppress_reset=${v}`, { body: {} });
      expect(r.status).toBe(400);
      expect((r.body as { message: string }).message).toMatch(/^suppress_reset/);
    }
    expect((await f.call('GET', `/gw/keys/${KEY}?hashed=yes`)).status).toBe(400);
  });

  test('GET returns the session with live quota values', async () => {
    const plain = await f.call('GET', `/gw/keys/${KEY}`);
    expect(plain.status).toBe(200);
    expect(plain.body).toEqual({ rate: 20, per: 60 });
    f.quotas.set(HASH, { remaining: 42, renews: 1_900_000_000 });
    const live = await f.call('GET', `/gw/keys/${KEY}`);
    expect(live.body).toEqual({ rate: 20, per: 60, quota_remaining: 42, quota_renews: 1_900_000_000 });
    // the store down: the stored session, not a 500
    const b = f.backend as unknown as { quota: (h: string) => Promise<unknown> };
    const saved = b.quota;
    b.quota = async () => {
      throw new Error("Stream isn't writeable and enableOfflineQueue options is false");
    };
    try {
      const down = await f.call('GET', `/gw/keys/${KEY}`);
      expect(down.status).toBe(200);
      expect(down.body).toEqual({ rate: 20, per: 60 });
    } finally {
      b.quota = saved;
    }
  });

  test('deprecated fields are mapped: apply_policy_id → apply_policies, enable_detail_recording → enable_detailed_recording', async () => {
    const r = await f.call('POST', '/gw/keys/deprecated-key', {
      body: { apply_policy_id: 'gold', enable_detail_recording: true },
    });
    expect(r.status).toBe(200);
    const g = await f.call('GET', '/gw/keys/deprecated-key');
    expect(g.body).toEqual({ apply_policies: ['gold'], enable_detailed_recording: true });
    // the current field wins when both are given
    await f.call('POST', '/gw/keys/deprecated-key', {
      body: {
        apply_policy_id: 'gold',
        apply_policies: [],
        enable_detail_recording: true,
        enable_detailed_recording: false,
      },
    });
    expect((await f.call('GET', '/gw/keys/deprecated-key')).body).toEqual({
      apply_policies: ['gold'],
      enable_detailed_recording: false,
    });
  });

  test('schema: unknown field → 400 naming it; wrong type → 400 naming it; nested field named; missing policy → 400', async () => {
    const u = await f.call('POST', '/gw/keys/k2', { body: { rate: 1, bogus: true } });
    expect(u.status).toBe(400);
    expect((u.body as { message: string }).message).toContain('bogus');
    const t = await f.call('POST', '/gw/keys/k2', { body: { rate: 'fast' } });
    expect((t.body as { message: string }).message).toMatch(/^rate: /);
    const n = await f.call('POST', '/gw/keys/k2', { body: { access_rights: { pets: { limit: { rate: -1 } } } } });
    expect(n.status).toBe(400);
    expect((n.body as { message: string }).message).toMatch(/^access_rights\.pets\.limit\.rate: /);
    const p = await f.call('POST', '/gw/keys/k2', { body: { apply_policies: ['gold', 'missing'] } });
    expect(p.status).toBe(400);
    expect((p.body as { message: string }).message).toMatch(/^apply_policies\.1: /);
    const dep = await f.call('POST', '/gw/keys/k2', { body: { apply_policy_id: 'missing' } });
    expect(dep.status).toBe(400);
    expect((dep.body as { message: string }).message).toMatch(/^apply_policy_id: policy "missing" not found/); // the field the client sent
    const re = await f.call('POST', '/gw/keys/k2', {
      body: { access_rights: { pets: { allowed_urls: [{ url: '(', methods: ['GET'] }] } } },
    });
    expect(re.status).toBe(400);
    expect((re.body as { message: string }).message).toMatch(
      /^access_rights\.pets\.allowed_urls\.0\.url: must be a valid regular expression/,
    );
    const mismatch = await f.call('POST', '/gw/keys/k2', { body: { access_rights: { pets: { api_id: 'other' } } } });
    expect(mismatch.status).toBe(400);
    expect((mismatch.body as { message: string }).message).toMatch(
      /^access_rights\.pets\.api_id: api_id must equal the map key/,
    );
    const per = await f.call('POST', '/gw/keys/k2', { body: { rate: 5, per: 0 } });
    expect(per.status).toBe(400);
    expect((per.body as { message: string }).message).toMatch(
      /^per: per must be greater than 0 when rate is greater than 0/,
    );
    expect((await f.call('GET', '/gw/keys/k2')).status).toBe(404);
  });

  test('Tyk-style "off" values are accepted: throttle -1, a smoothing object with only enabled: false', async () => {
    const r = await f.call('POST', '/gw/keys/k-off', {
      body: { rate: 5, per: 1, throttle_interval: -1, throttle_retry_limit: -1, smoothing: { enabled: false } },
    });
    expect(r.status).toBe(200);
    expect((await f.call('DELETE', '/gw/keys/k-off')).status).toBe(200);
  });

  test('every field of the key body table is accepted', async () => {
    const full = {
      access_rights: {
        pets: {
          api_id: 'pets',
          api_name: 'Pets',
          versions: ['Default'],
          allowed_urls: [{ url: '/x', methods: ['GET'] }],
          limit: {
            rate: 5,
            per: 1,
            quota_max: 10,
            quota_remaining: 10,
            quota_renewal_rate: 60,
            throttle_interval: 1,
            throttle_retry_limit: 2,
            smoothing: { enabled: true, threshold: 1, step: 1, trigger: 0.5, delay: 5 },
          },
        },
      },
      alias: 'a',
      allowance: 5,
      apply_policies: ['gold'],
      apply_policy_id: 'gold',
      basic_auth_data: {},
      certificate: '',
      data_expires: 0,
      date_created: '2024-01-01T00:00:00Z',
      enable_detail_recording: false,
      enable_detailed_recording: true,
      enable_http_signature_validation: false,
      expires: 0,
      hmac_enabled: false,
      hmac_string: '',
      id_extractor_deadline: 0,
      is_inactive: false,
      jwt_data: {},
      last_check: 0,
      last_updated: '0',
      max_query_depth: 0,
      meta_data: { a: 1 },
      monitor: {},
      oauth_client_id: '',
      oauth_keys: null,
      org_id: 'o',
      per: 1,
      quota_max: 10,
      quota_remaining: 10,
      quota_renewal_rate: 60,
      quota_renews: 0,
      rate: 5,
      rsa_certificate_id: '',
      session_lifetime: 0,
      smoothing: null,
      tags: ['t'],
      throttle_interval: 0,
      throttle_retry_limit: 0,
    };
    const r = await f.call('POST', '/gw/keys/full-key', { body: full });
    expect(r.status).toBe(200);
    const g = (await f.call('GET', '/gw/keys/full-key')).body as Record<string, unknown>;
    expect(g).not.toHaveProperty('apply_policy_id');
    expect(g).not.toHaveProperty('enable_detail_recording');
    expect(g.enable_detailed_recording).toBe(true);
  });

  test('hashed=true: keyID is the hash; key_hash echoes it; the raw key stays unknown', async () => {
    const h = sha256hex('a-key-we-never-send');
    const r = await f.call('POST', `/gw/keys/${h}?hashed=true`, { body: { rate: 3, per: 1 } });
    expect(r.body).toEqual({ key: h, key_hash: h, action: 'added', status: 'ok' });
    expect((await f.call('GET', `/gw/keys/${h}?hashed=true`)).body).toEqual({ rate: 3, per: 1 });
    expect((await f.call('GET', `/gw/keys/${h}`)).status).toBe(404); // without hashed it is hashed again
    expect((await f.call('POST', '/gw/keys/not-a-hash?hashed=true', { body: {} })).status).toBe(400);
    // the same key posted raw lands on the same record
    expect((await f.call('POST', '/gw/keys/a-key-we-never-send', { body: { rate: 4, per: 1 } })).body).toMatchObject({
      action: 'modified',
      key_hash: h,
    });
  });

  test('PUT replaces (404 when missing); GET /gw/keys lists hashes; DELETE (404 when missing)', async () => {
    expect((await f.call('PUT', '/gw/keys/nobody', { body: { rate: 1, per: 1 } })).status).toBe(404);
    const put = await f.call('PUT', `/gw/keys/${KEY}`, { body: { rate: 7, per: 7 } });
    expect(put.body).toEqual({ key: KEY, key_hash: HASH, action: 'modified', status: 'ok' });
    expect((await f.call('GET', `/gw/keys/${KEY}`)).body).toMatchObject({ rate: 7, per: 7 });
    const k = AccessKeyResource.parse(readYaml(`accesskey-key-${HASH.slice(0, 16)}.yaml`));
    expect(k.metadata.annotations).toBeUndefined(); // PUT without suppress_reset
    const list = await f.call('GET', '/gw/keys');
    expect(list.status).toBe(200);
    expect((list.body as { keys: string[] }).keys).toEqual(expect.arrayContaining([HASH, sha256hex('full-key')]));
    const del = await f.call('DELETE', `/gw/keys/${KEY}`);
    expect(del.body).toEqual({ key: KEY, key_hash: HASH, action: 'deleted', status: 'ok' });
    expect((await f.call('DELETE', `/gw/keys/${KEY}`)).status).toBe(404);
    expect((await f.call('GET', `/gw/keys/${KEY}`)).status).toBe(404);
    expect(readdirSync(gwDir())).not.toContain(`accesskey-key-${HASH.slice(0, 16)}.yaml`);
    expect(f.source.current().keys.some((x) => x.spec.key_hash === HASH)).toBe(false);
  });

  test('a key from a hand-written manifest is readable and listed, but not writable (409)', async () => {
    writeFileSync(
      join(f.dir, 'handkey.yaml'),
      `apiVersion: v1\nkind: Secret\nmetadata: {name: hand}\nstringData: {key: hand-written-key}\n---\napiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: hand}\nspec: {rate: 9, per: 9, secretRef: {name: hand}}\n`,
    );
    await f.source.refresh();
    expect((await f.call('GET', '/gw/keys/hand-written-key')).body).toEqual({ rate: 9, per: 9 });
    expect(((await f.call('GET', '/gw/keys')).body as { keys: string[] }).keys).toContain(
      sha256hex('hand-written-key'),
    );
    expect((await f.call('POST', '/gw/keys/hand-written-key', { body: {} })).status).toBe(409);
    expect((await f.call('DELETE', '/gw/keys/hand-written-key')).status).toBe(409);
  });
});

describe('HTTP errors', () => {
  test('malformed JSON → 400; empty body → 400; non-object → 400', async () => {
    const m = await f.call('POST', '/gw/keys/x', { body: '{"rate": ' });
    expect(m.status).toBe(400);
    expect((m.body as { message: string }).message).toMatch(/malformed JSON/);
    expect(
      (await f.call('POST', '/gw/keys/x', { body: '', headers: { 'content-type': 'application/json' } })).status,
    ).toBe(400);
    expect((await f.call('POST', '/gw/keys/x', { body: [1] })).status).toBe(400);
    expect((await f.call('POST', '/api/apis/oauth/pets', { body: '"str"' })).status).toBe(400);
  });

  test('non-JSON content type → 415 (and missing content type)', async () => {
    const r = await f.call('POST', '/gw/keys/x', {
      body: 'rate=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(r.status).toBe(415);
    expect(r.body).toEqual({ status: 'error', message: expect.any(String) });
    expect((await f.call('POST', '/api/proxy', { body: '{}', headers: { 'content-type': 'text/plain' } })).status).toBe(
      415,
    );
    expect(
      (
        await f.call('POST', '/gw/keys/x', {
          body: '{}',
          headers: { 'content-type': 'application/json; charset=utf-8' },
        })
      ).status,
    ).toBe(200);
  });

  test('body over 1 MiB → 413 (declared length, and chunked without a length)', async () => {
    const big = JSON.stringify({ alias: 'x'.repeat(1024 * 1024) });
    const declared = await f.call('POST', '/gw/keys/big', { body: big });
    expect(declared.status).toBe(413);
    expect(declared.body).toEqual({ status: 'error', message: expect.any(String) });
    // chunked: the facade stops reading past the limit
    const status = await new Promise<number>((resolve, reject) => {
      const u = new URL(`${f.url}/gw/keys/big`);
      const req = httpRequest(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-gw-authorization': SECRET },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      const chunk = 'x'.repeat(64 * 1024);
      req.write('{"alias":"');
      for (let i = 0; i < 20; i++) req.write(chunk);
      req.end('"}');
    });
    expect(status).toBe(413);
    expect((await f.call('GET', '/gw/keys/big')).status).toBe(404);
  });

  test('a body whose block YAML would pass the 1 MiB manifest limit is stored as compact JSON: 200, readable, reloads', async () => {
    const meta = { a: Array.from({ length: 110_000 }, () => [1]) }; // ~440 KB of JSON, ~1.3 MB of block YAML
    const r = await f.call('POST', '/gw/keys/wide', { body: JSON.stringify({ rate: 3, per: 60, meta_data: meta }) });
    expect(r.status).toBe(200);
    const file = readdirSync(gwDir()).find(
      (x) => x.startsWith('accesskey-') && readFileSync(join(gwDir(), x), 'utf8').includes(sha256hex('wide')),
    )!;
    const text = readFileSync(join(gwDir(), file), 'utf8');
    expect(text.split('\n')[1]!.startsWith('{')).toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(1024 * 1024);
    const loaded = loadManifestDir(f.dir);
    expect(loaded.errors).toEqual([]);
    expect(loaded.resources.some((x) => x.file.endsWith(file))).toBe(true);
    const got = await f.call('GET', '/gw/keys/wide');
    expect(got.status).toBe(200);
    expect((got.body as { meta_data: unknown }).meta_data).toEqual(meta);
    expect((await f.call('DELETE', '/gw/keys/wide')).status).toBe(200);
  }, 90_000);

  test('a body at the depth limit loads back as a manifest (the envelope adds a level; it used to be 200 and never served)', async () => {
    const nested = (depth: number): string => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const r = await f.call('POST', '/gw/keys/deep63', { body: `{"meta_data":${nested(63)}}` });
    expect(r.status).toBe(200);
    expect(loadManifestDir(f.dir).errors).toEqual([]);
    expect((await f.call('GET', '/gw/keys/deep63')).status).toBe(200);
    expect((await f.call('POST', '/gw/keys/deep64', { body: `{"meta_data":${nested(64)}}` })).status).toBe(400);
    expect((await f.call('DELETE', '/gw/keys/deep63')).status).toBe(200);
  }, 90_000);

  test('a key applying an inactive policy → 400 naming the field (the gateway would refuse it; a cluster facade waited 10 s for a 504)', async () => {
    const r = await f.call('POST', '/gw/keys/sleepy', { body: { apply_policies: ['gold', 'dormant'] } });
    expect(r.status).toBe(400);
    expect((r.body as { message: string }).message).toBe(
      'apply_policies.1: policy "dormant" is inactive (active: false) in namespace default',
    );
    expect((await f.call('GET', '/gw/keys/sleepy')).status).toBe(404);
  });

  test('unknown route → 404; wrong method → 405 with Allow', async () => {
    const r = await f.call('GET', '/nope');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ status: 'error', message: expect.any(String) });
    const m = await f.call('PATCH', '/gw/keys/x');
    expect(m.status).toBe(405);
    expect(m.headers.allow).toBe('POST, PUT, GET, DELETE, HEAD');
    // HEAD wherever GET is served: the GET's status and headers, no body
    const head = await f.call('HEAD', '/openapi.json');
    expect(head.status).toBe(200);
    expect(head.headers['content-type']).toMatch(/^application\/json/);
    expect(head.body).toBe('');
    expect((await f.call('HEAD', '/gw/keys/nobody')).status).toBe(404);
    expect((await f.call('HEAD', '/healthz')).status).toBe(200);
    expect((await f.call('GET', '/api/proxy')).status).toBe(405);
    expect((await f.call('DELETE', '/api/apis/oauth/pets')).status).toBe(405);
  });

  test('GET /openapi.json is an OpenAPI 3.1 document of every route', async () => {
    const r = await f.call('GET', '/openapi.json');
    expect(r.status).toBe(200);
    const doc = r.body as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/apis/oauth/{apiId}',
        '/api/apis/oauth/{apiId}/{clientId}',
        '/api/proxy',
        '/gw/keys',
        '/gw/keys/{keyID}',
      ]),
    );
  });

  test('healthz / readyz', async () => {
    // the build it runs (lib/build-info.ts): version, Node.js, the commit of `make build`'s checkout
    expect((await f.call('GET', '/healthz')).body).toEqual({ status: 'ok', build: buildInfo() });
    expect((await f.call('GET', '/readyz')).status).toBe(200);
  });
});

describe('persistence', () => {
  test('every manifest the facade wrote re-loads with the resource schemas; a new facade on the same dir sees it all', async () => {
    const loaded = loadManifestDir(f.dir);
    expect(loaded.errors).toEqual([]);
    const own = loaded.resources.filter((r) => r.file.startsWith('.gw'));
    expect(own.length).toBeGreaterThan(3);
    const kinds = new Set(own.map((r) => r.resource.kind));
    expect([...kinds].sort()).toEqual(['AccessKey', 'OAuthClient', 'Secret']);
    for (const r of own) {
      expect(r.resource.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('gw-facade');
    }
    // a "restarted" facade on the same directory
    const { DirBackend } = await import('../../../facade/backend-dir.js');
    const { toSnapshot } = await import('../../../compiler/snapshot.js');
    const fresh = new DirBackend({
      dir: f.dir,
      snapshot: () => toSnapshot(loadManifestDir(f.dir).resources.map((x) => x.resource)),
    });
    expect((await fresh.listKeys()).sort()).toEqual(
      ((await f.call('GET', '/gw/keys')).body as { keys: string[] }).keys.sort(),
    );
    expect((await fresh.listClients('pets')).length).toBe(1);
    expect((await fresh.listClients('pets'))[0]!.secret).toBeTruthy();
    const secrets = readdirSync(gwDir()).filter((x) => x.startsWith('secret-'));
    expect(secrets.length).toBe(1); // deleted clients took their Secret along
  });
});

describe('rate limit of the facade itself', () => {
  test('over the per-client limit → 429 with Retry-After; probes exempt', async () => {
    const g = await startFacade({ rateLimit: { rate: 5, per: 2 } });
    try {
      const statuses: number[] = [];
      let retryAfter: string | string[] | undefined;
      for (let i = 0; i < 7; i++) {
        const r = await g.call('GET', '/gw/keys');
        statuses.push(r.status);
        if (r.status === 429) {
          retryAfter = r.headers['retry-after'];
          expect(r.body).toEqual({ status: 'error', message: expect.any(String) });
        }
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(retryAfter)).toBeLessThanOrEqual(2);
      expect((await g.call('GET', '/healthz')).status).toBe(200);
      f.recorded.push(...g.recorded);
    } finally {
      await g.close();
    }
  });
});

describe('OpenAPI conformance', () => {
  test('every response of this suite: status documented, top-level fields documented, required present', () => {
    const { problems, checked } = conformance(f.recorded);
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(50);
  });

  test('no raw key, secret or token in any log line', () => {
    const logs = f.logs.join('');
    for (const s of [SECRET, TOKEN, 'my-raw-key-abcdef', 'sup3r-s3cret', 'a-key-we-never-send', 'hand-written-key'])
      expect(logs).not.toContain(s);
  });
});
