/**
 * OAuth 2.0 in a cluster, end to end (docs/contract.md#oauth): real kube-apiserver and Redis, `gw controller`, two
 * `gw sidecar` processes and `gw facade` spawned from dist. Clients come from `kubectl apply` (CR + Secret)
 * and from the facade; every grant crosses the two sidecars (a token issued by one is used at the other);
 * the client's policy is one allowance and one quota whichever token and sidecar a request uses; revoking,
 * deleting a client and changing its policy reach both sidecars; no raw credential reaches Redis, a
 * resource, a log line or /metrics; an emptied store loses the tokens, not the clients (docs/oauth.md).
 */
import { jest } from '@jest/globals';
import type { Server } from 'node:http';
import type { Redis } from 'ioredis';
import { clientResourceName } from '../../../facade/backend.js';
import { clientRecordKey } from '../../../contract/oauth/clients.js';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { freshNamespace, kubectl } from '../../helpers/kube.js';
import { freshRedis } from '../../helpers/redis.js';
import {
  startClusterStack,
  type ClusterStack,
  type ServerProcess,
  type SidecarProcess,
} from '../../helpers/server-process.js';
import {
  basic,
  bearer,
  createClient,
  del,
  get,
  oaManifests,
  oauthManifests,
  pkce,
  postForm,
  postJson,
  type Answer,
} from '../../helpers/oauth.js';
import { eventually, getJson, waitReady, type Controller } from '../operator/helpers.js';

jest.setTimeout(120_000);

const GW_SECRET = 'cluster-oauth-gw-secret-0123456789';
const MGMT_TOKEN = 'cluster-oauth-mgmt-token-0123456789';
const GW = { 'x-gw-authorization': GW_SECRET };
const MGMT = { authorization: `Bearer ${MGMT_TOKEN}` };
const APP_SECRET = 'cr-app-secret-0123456789abcdef';
const TIGHT_SECRET = 'cr-tight-secret-0123456789abcdef';
const QUOTA_SECRET = 'cr-quota-secret-0123456789abcdef';
const CB = 'https://app.example/cb';

describe('OAuth 2.0 in a cluster (kube-apiserver + Redis + controller + two sidecars + facade)', () => {
  let ns: string;
  let redis: Redis;
  let echo: { server: Server; url: string };
  let stack: ClusterStack;
  let ctl: Controller;
  let sidecars: SidecarProcess[];
  let facade: ServerProcess;
  /** Every raw credential the test saw: none may appear in Redis, a resource, a log line or /metrics. */
  const raw: string[] = [];
  /** Client secrets: in their Secrets by design, nowhere else. */
  const clientSecrets: string[] = [APP_SECRET, TIGHT_SECRET, QUOTA_SECRET];
  const seen = (a: Answer): Answer => {
    for (const k of ['access_token', 'refresh_token', 'code'])
      if (typeof a.body[k] === 'string') raw.push(a.body[k] as string);
    if (typeof a.body.secret === 'string') clientSecrets.push(a.body.secret);
    return a;
  };
  const [s1, s2] = [0, 1];
  const gwUrl = (i: number): string => sidecars[i]!.url;
  const token = async (i: number, api: string, form: Record<string, string>, id: string, secret: string) =>
    seen(await postForm(`${gwUrl(i)}/${api}/oauth/token`, form, { authorization: basic(id, secret) }));
  const cc = async (i: number, api: string, id: string, secret: string): Promise<string> => {
    const t = await token(i, api, { grant_type: 'client_credentials' }, id, secret);
    expect(t.status).toBe(200);
    return t.body.access_token as string;
  };
  const call = (i: number, api: string, t: string) => get(`${gwUrl(i)}/${api}/x`, bearer(t));
  /** The answers of `api` to each [sidecar, token] in turn. */
  const across = async (api: string, calls: readonly (readonly [number, string])[]): Promise<Answer[]> => {
    const answers: Answer[] = [];
    for (const [i, t] of calls) answers.push(await call(i, api, t));
    return answers;
  };

  beforeAll(async () => {
    ns = await freshNamespace('oauth-cl');
    redis = await freshRedis();
    echo = await startEcho();
    // `oa`: every grant; cr-app on policy `roomy`, cr-tight on `tight` (3 per 60 s);
    // `qa`: client_credentials, cr-quota on policy `quota` (4 per hour)
    const manifests =
      oaManifests(echo.url, [
        { name: 'cr-app', id: 'cr-app', secret: APP_SECRET, redirect: CB },
        { name: 'cr-tight', id: 'cr-tight', secret: TIGHT_SECRET, policy: 'tight' },
      ]) +
      '---\napiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: tight}\nspec: {rate: 3, per: 60}\n---\n' +
      oauthManifests({
        api: 'qa',
        target: echo.url,
        policy: 'quota',
        rate: 1000,
        per: 60,
        quota: 4,
        meta: '{allowed_access_types: [client_credentials]}',
        clients: [{ name: 'cr-quota', id: 'cr-quota', secret: QUOTA_SECRET }],
      });
    const applied = await kubectl(['apply', '-n', ns, '-f', '-'], manifests);
    if (applied.code !== 0) throw new Error(applied.stderr);
    stack = await startClusterStack({
      ns,
      upstream: echo.url,
      controllerArgs: ['--resync-period', '30'],
      reconciled: async () => {
        await Promise.all(
          ['cr-app', 'cr-tight', 'cr-quota'].map((c) => waitReady(ns, 'oauthclient', c, 'True', 'Reconciled', 20_000)),
        );
      },
      sidecars: 2,
      // a sidecar serves the APIs once it has the compiled config: 401 (no token) instead of 404
      serves: '/oa/x',
      facadeConfig: () => ({
        secret: GW_SECRET,
        access_tokens: [MGMT_TOKEN],
        facade_rate_limit: { rate: 1000, per: 1 },
      }),
    });
    ({ ctl, sidecars, facade } = stack);
  });

  afterAll(async () => {
    await stack?.stop();
    echo?.server.close();
    redis?.disconnect();
  });

  test('client_credentials: a token issued by one sidecar calls the API at both', async () => {
    const t = await cc(s1, 'oa', 'cr-app', APP_SECRET);
    for (const i of [s1, s2]) {
      const r = await call(i, 'oa', t);
      expect(r.status).toBe(200);
      expect(r.body.path).toBe('/x');
    }
    const bad = await call(s2, 'oa', 'no-such-token-0000000000000000000000000');
    expect(bad.status).toBe(401);
    expect(bad.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
  });

  /** authorize at sidecar 1 → consent at the facade → the code. */
  async function code(challenge: string): Promise<string> {
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: 'cr-app',
      redirect_uri: CB,
      state: 'st',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    const auth = await get(`${gwUrl(s1)}/oa/oauth/authorize?${q}`);
    expect(auth.status).toBe(307);
    expect(auth.headers.location).toBe(`https://login.example/consent?from=gw&${q}`);
    const consent = seen(
      await postJson(
        `${facade.url}/gw/oauth/authorize-client`,
        {
          api_id: 'oa',
          client_id: 'cr-app',
          redirect_uri: CB,
          response_type: 'code',
          state: 'st',
          code_challenge: challenge,
          code_challenge_method: 'S256',
        },
        GW,
      ),
    );
    expect(consent.status).toBe(200);
    const to = new URL(consent.body.redirect_to as string);
    expect(to.searchParams.get('code')).toBe(consent.body.code);
    return consent.body.code as string;
  }
  const redeem = (i: number, c: string, verifier: string) =>
    token(
      i,
      'oa',
      { grant_type: 'authorization_code', code: c, redirect_uri: CB, code_verifier: verifier },
      'cr-app',
      APP_SECRET,
    );
  const refresh = (i: number, rt: string) =>
    token(i, 'oa', { grant_type: 'refresh_token', refresh_token: rt }, 'cr-app', APP_SECRET);

  test('authorization_code + PKCE across sidecars; the code is single use on every sidecar; introspect', async () => {
    const p = pkce();
    const c = await code(p.challenge);
    const wrong = await redeem(s2, c, pkce().verifier);
    expect({ status: wrong.status, error: wrong.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    const p2 = pkce();
    const c2 = await code(p2.challenge);
    const ok = await redeem(s2, c2, p2.verifier);
    expect(ok.status).toBe(200);
    expect(typeof ok.body.refresh_token).toBe('string');
    const at = ok.body.access_token as string;
    expect((await call(s1, 'oa', at)).status).toBe(200);
    // the same code at the other sidecar: invalid_grant, and the tokens it gave are revoked everywhere
    const again = await redeem(s1, c2, p2.verifier);
    expect({ status: again.status, error: again.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    for (const i of [s1, s2])
      await eventually(async () => (await call(i, 'oa', at)).status === 401, 1000, 'family revoked');

    const t = await cc(s2, 'oa', 'cr-app', APP_SECRET);
    const on = await postJson(`${facade.url}/gw/oauth/introspect`, { token: t }, GW);
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ active: true, client_id: 'cr-app', api_id: 'oa', token_type: 'bearer' });
    expect((await postForm(`${facade.url}/gw/oauth/introspect`, { token: at }, GW)).body).toEqual({ active: false });
  });

  test('refresh_token rotation across sidecars; a replayed refresh token revokes the family on both', async () => {
    const p = pkce();
    const first = await redeem(s1, await code(p.challenge), p.verifier);
    expect(first.status).toBe(200);
    const second = await refresh(s2, first.body.refresh_token as string);
    expect(second.status).toBe(200);
    expect(second.body.refresh_token).not.toBe(first.body.refresh_token);
    const third = await refresh(s1, second.body.refresh_token as string);
    expect(third.status).toBe(200);
    const at = third.body.access_token as string;
    for (const i of [s1, s2]) expect((await call(i, 'oa', at)).status).toBe(200);
    const replay = await refresh(s2, first.body.refresh_token as string);
    expect({ status: replay.status, error: replay.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    for (const i of [s1, s2])
      await eventually(async () => (await call(i, 'oa', at)).status === 401, 1000, 'descendants revoked');
    expect((await refresh(s1, third.body.refresh_token as string)).status).toBe(400);
  });

  test('revoke (RFC 7009) at one sidecar: the token is refused at the other within 1 s', async () => {
    const t = await cc(s1, 'oa', 'cr-app', APP_SECRET);
    for (const i of [s1, s2]) expect((await call(i, 'oa', t)).status).toBe(200);
    const r = await postForm(
      `${gwUrl(s2)}/oa/oauth/revoke`,
      { token: t },
      { authorization: basic('cr-app', APP_SECRET) },
    );
    expect(r.status).toBe(200);
    const t0 = Date.now();
    for (const i of [s1, s2]) await eventually(async () => (await call(i, 'oa', t)).status === 401, 1000, 'revoked');
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  test("one allowance per client: the policy's 3 per 60 s across two tokens and two sidecars", async () => {
    const a = await cc(s1, 'oa', 'cr-tight', TIGHT_SECRET);
    const b = await cc(s2, 'oa', 'cr-tight', TIGHT_SECRET);
    const answers = await across('oa', [
      [s1, a],
      [s2, b],
      [s2, a],
      [s1, b],
      [s2, a],
    ]);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(answers[3]!.body).toEqual({ error: 'Rate Limit Exceeded' });
    // another client of the same policy has an allowance of its own
    expect((await call(s2, 'oa', await cc(s2, 'oa', 'cr-app', APP_SECRET))).status).toBe(200);
  });

  test('one quota per client: 4 across two tokens and two sidecars, then 403 Quota exceeded', async () => {
    const a = await cc(s1, 'qa', 'cr-quota', QUOTA_SECRET);
    const b = await cc(s2, 'qa', 'cr-quota', QUOTA_SECRET);
    const answers = await across('qa', [
      [s1, a],
      [s2, b],
      [s1, b],
      [s2, a],
      [s1, a],
      [s2, b],
    ]);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 403, 403]);
    expect(answers[5]!.body).toEqual({ error: 'Quota exceeded' });
  });

  test('a client created through the facade: tokens at both sidecars; deleted → refused on both within 1 s', async () => {
    const created = seen(await createClient(facade.url, 'oa', 'fac-app', 'https://fac.example/cb', MGMT));
    expect(created.status).toBe(200);
    const secret = created.body.secret as string;
    const name = clientResourceName(ns, 'oa', 'fac-app');
    expect((await getJson(ns, 'oauthclient', name)) !== undefined).toBe(true);
    const t1 = await cc(s1, 'oa', 'fac-app', secret);
    const t2 = await cc(s2, 'oa', 'fac-app', secret);
    // the facade client's allowance is its own (3 per 60 s of `tight`), shared by its two tokens
    const answers = await across('oa', [
      [s1, t1],
      [s2, t2],
    ]);
    expect(answers.map((r) => r.status)).toEqual([200, 200]);

    expect((await del(`${facade.url}/api/apis/oauth/oa/fac-app`, MGMT)).status).toBe(200);
    expect(await redis.exists(clientRecordKey(ns, 'oa', 'fac-app'))).toBe(0);
    const t0 = Date.now();
    for (const [i, t] of [
      [s1, t2],
      [s2, t1],
    ] as const)
      await eventually(async () => (await call(i, 'oa', t)).status === 401, 1000, 'facade client deleted');
    expect(Date.now() - t0).toBeLessThan(2000);
    expect((await postJson(`${facade.url}/gw/oauth/introspect`, { token: t1 }, GW)).body).toEqual({ active: false });
  });

  test('a changed policy applies at the next request (both sidecars); the CR client deleted → refused within 1 s', async () => {
    const t = await cc(s1, 'oa', 'cr-app', APP_SECRET);
    expect((await call(s2, 'oa', t)).headers['x-ratelimit-limit']).toBe('1000');
    const p = await kubectl(['patch', '-n', ns, 'policy', 'roomy', '--type', 'merge', '-p', '{"spec":{"rate":500}}']);
    expect(p.code).toBe(0);
    for (const i of [s1, s2])
      await eventually(
        async () => (await call(i, 'oa', t)).headers['x-ratelimit-limit'] === '500',
        15_000,
        'the new policy',
      );
    expect((await call(s1, 'oa', t)).status).toBe(200);

    const d = await kubectl(['delete', '-n', ns, 'oauthclient', 'cr-app', '--timeout=20s']);
    expect(d.code).toBe(0);
    expect(await redis.exists(clientRecordKey(ns, 'oa', 'cr-app'))).toBe(0);
    const t0 = Date.now();
    for (const i of [s1, s2])
      await eventually(async () => (await call(i, 'oa', t)).status === 401, 1000, 'CR client deleted');
    expect(Date.now() - t0).toBeLessThan(2000);
    const again = await token(s2, 'oa', { grant_type: 'client_credentials' }, 'cr-app', APP_SECRET);
    expect({ status: again.status, error: again.body.error }).toEqual({ status: 401, error: 'invalid_client' });
  });

  test('no raw token, code or secret in Redis, the resources, a log line or /metrics', async () => {
    // Redis: every key name and value of the suite's database
    const texts: Record<string, string> = {};
    let cursor = '0';
    const keys: string[] = [];
    do {
      const [next, batch] = await redis.scan(cursor, 'COUNT', 500);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    expect(keys.some((k) => k.startsWith('gw:oauth:tok:'))).toBe(true);
    const values: string[] = [];
    for (const k of keys) {
      const type = await redis.type(k);
      if (type === 'string') values.push((await redis.get(k)) ?? '');
      else if (type === 'hash') values.push(JSON.stringify(await redis.hgetall(k)));
      else if (type === 'set') values.push(...(await redis.smembers(k)));
      else if (type === 'zset') values.push(...(await redis.zrange(k, '0', '-1')));
      else if (type === 'list') values.push(...(await redis.lrange(k, 0, -1)));
    }
    texts.redis = [...keys, ...values].join('\n');
    // resources: CRs and ConfigMaps (client secrets live in Secrets, by design; tokens and codes nowhere)
    for (const kind of ['oauthclients', 'apidefinitions', 'policies', 'accesskeys', 'configmaps', 'events']) {
      const r = await kubectl(['get', '-n', ns, kind, '-o', 'json']);
      expect(r.code).toBe(0);
      texts[kind] = r.stdout;
    }
    const secrets = await kubectl(['get', '-n', ns, 'secrets', '-o', 'json']);
    texts.logs = [ctl.output(), facade.output(), ...sidecars.map((s) => s.output())].join('\n');
    for (const url of [ctl.metricsUrl, facade.url, ...sidecars.map((s) => s.ops)])
      texts[`metrics ${url}`] = (await get(`${url}/metrics`)).text;
    expect(texts[`metrics ${sidecars[0]!.ops}`]).toMatch(
      /gw_oauth_tokens_issued_total\{api="oa",grant="client_credentials"\} \d+/,
    );
    expect(raw.length).toBeGreaterThan(15);
    expect(clientSecrets.length).toBe(4);
    for (const [where, text] of Object.entries(texts))
      for (const r of [...raw, ...clientSecrets]) {
        expect({ where, found: text.includes(r) }).toEqual({ where, found: false });
        expect({ where, found: text.includes(Buffer.from(r).toString('base64')) }).toEqual({ where, found: false });
      }
    // Secrets hold client secrets only: no token or code
    expect(secrets.code).toBe(0);
    for (const r of raw)
      expect({ r, found: secrets.stdout.includes(Buffer.from(r).toString('base64')) }).toEqual({ r, found: false });
  });

  test('the store emptied (FLUSHDB): a valid token still authenticates at both sidecars, during and after the restore', async () => {
    // cr-quota is the client left by the tests above (its quota is used up: 403 Quota exceeded is an
    // authenticated answer; 401 invalid_token is not)
    const authenticated = async (i: number, token: string): Promise<void> => {
      const r = await call(i, 'qa', token);
      expect({ status: r.status, body: r.body }).not.toEqual({ status: 401, body: { error: 'invalid_token' } });
      expect([200, 403]).toContain(r.status);
      if (r.status === 403) expect(r.body).toEqual({ error: 'Quota exceeded' });
    };
    const t = await cc(s1, 'qa', 'cr-quota', QUOTA_SECRET);
    await authenticated(s2, t);
    await redis.flushdb();
    // right after the loss: the sidecars keep the token they issued or read (docs/contract.md#faults)
    for (const i of [s1, s2]) await authenticated(i, t);
    // the controller notices the emptied store, restores it and resyncs every OAuthClient's record
    await eventually(
      async () => (await redis.exists(clientRecordKey(ns, 'qa', 'cr-quota'))) === 1,
      15_000,
      'client record restored',
    );
    // the sidecars wrote the token back to the store
    await eventually(async () => (await redis.keys('gw:oauth:tok:*')).length > 0, 10_000, 'token written back');
    for (const i of [s1, s2]) await authenticated(i, t);
    const fresh = await cc(s2, 'qa', 'cr-quota', QUOTA_SECRET);
    for (const i of [s1, s2]) await authenticated(i, fresh);
  });
});
