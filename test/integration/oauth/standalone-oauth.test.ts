/**
 * OAuth 2.0 at the gateway, end to end in `gw standalone` (docs/contract.md#oauth): real process, real HTTP, every
 * grant, the RFC 6749 §5.2 error table, PKCE, code and refresh-token reuse, revocation, expiry, the
 * client's policy shared by its tokens, a deleted client, a changed policy, a restart, and a scan for
 * raw credentials in logs, metrics and files.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from '../../helpers/sidecar.js';
import type { Standalone } from '../../helpers/standalone.js';
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
  startOAuthStandalone,
  type Answer,
  type OAuthStandalone,
} from '../../helpers/oauth.js';

const SECRET1 = 'app1-secret-0123456789abcdef';
const SECRET2 = 'app2-secret-0123456789abcdef';
const CC_SECRET = 'cc1-secret-0123456789abcdef';
const GW = { 'x-gw-authorization': 'test-secret' };
const MGMT = { authorization: 'Bearer test-token' };

describe('OAuth 2.0 in gw standalone', () => {
  let st: OAuthStandalone;
  let gw: Standalone;
  let dir: string;
  /** Every raw credential the test saw: none may appear in logs, metrics or files. */
  const raw: string[] = [SECRET1, SECRET2, CC_SECRET];
  const seen = (a: Answer): Answer => {
    for (const k of ['access_token', 'refresh_token', 'code', 'secret'])
      if (typeof a.body[k] === 'string') raw.push(a.body[k] as string);
    return a;
  };
  const token = async (api: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
    seen(await postForm(`${gw.gateway}/${api}/oauth/token`, form, headers));
  const cc = (id = 'app1', secret = SECRET1) =>
    token('oa', { grant_type: 'client_credentials' }, { authorization: basic(id, secret) });
  const callOa = (t: string) => get(`${gw.gateway}/oa/hello`, bearer(t));

  beforeAll(async () => {
    st = await startOAuthStandalone(
      (target) => ({
        'oa.yaml': oaManifests(target, [{ name: 'app1', id: 'app1', secret: SECRET1 }]),
        'lim.yaml': oauthManifests({
          api: 'lim',
          target,
          policy: 'tight',
          rate: 3,
          per: 60,
          meta: '{allowed_access_types: [client_credentials]}',
          clients: [
            { name: 'app2', id: 'app2', secret: SECRET2 },
            { name: 'app3', id: 'app3', secret: SECRET1 },
          ],
        }),
        'cc.yaml': oauthManifests({
          api: 'cc',
          target,
          policy: 'free',
          rate: 1000,
          per: 1,
          meta: '{allowed_access_types: [client_credentials], access_token_expires: 1}',
          clients: [{ name: 'cc1', id: 'cc1', secret: CC_SECRET }],
        }),
      }),
      [],
      { GW_LOG_LEVEL: 'debug' },
    );
    ({ dir, sa: gw } = st);
  });
  afterAll(async () => {
    await st?.stop();
  });

  test('client_credentials (HTTP Basic): a bearer token that calls the API; no-store', async () => {
    const t = await cc();
    expect(t.status).toBe(200);
    expect(t.headers['cache-control']).toBe('no-store');
    expect(t.body).toMatchObject({ token_type: 'bearer', expires_in: 3600 });
    expect(t.body.refresh_token).toBeUndefined();
    const r = await callOa(t.body.access_token as string);
    expect(r.status).toBe(200);
    expect((r.body as { path: string }).path).toBe('/hello');
  });

  test('client_credentials with client_id and client_secret in the body', async () => {
    // on the API whose tokens live an hour (cc's live 1 s: a loaded machine could see one expire before use)
    const t = await token('oa', { grant_type: 'client_credentials', client_id: 'app1', client_secret: SECRET1 });
    expect(t.status).toBe(200);
    expect((await callOa(t.body.access_token as string)).status).toBe(200);
  });

  test('missing token → 401 as for keys; unknown → 401 invalid_token with WWW-Authenticate', async () => {
    const missing = await get(`${gw.gateway}/oa/hello`);
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({ error: 'Authorization field missing' });
    const unknown = await callOa('no-such-token-0000000000000000000000000');
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ error: 'invalid_token' });
    expect(unknown.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
  });

  test('a token works only on the API it was issued for', async () => {
    const t = await token('cc', { grant_type: 'client_credentials', client_id: 'cc1', client_secret: CC_SECRET });
    expect((await callOa(t.body.access_token as string)).status).toBe(401);
  });

  describe('RFC 6749 §5.2 error table', () => {
    const err = (a: Answer, status: number, error: string) => {
      expect({ status: a.status, error: a.body.error }).toEqual({ status, error });
      expect(typeof a.body.error_description).toBe('string');
      expect(a.headers['cache-control']).toBe('no-store');
    };
    test('invalid_client: wrong secret → 401 with WWW-Authenticate', async () => {
      const a = await token('oa', { grant_type: 'client_credentials' }, { authorization: basic('app2', 'wrong') });
      err(a, 401, 'invalid_client');
      expect(a.headers['www-authenticate']).toMatch(/^Basic/);
    });
    test('invalid_client: unknown client → 401', async () => {
      err(
        await token('oa', { grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'x' }),
        401,
        'invalid_client',
      );
    });
    test('invalid_client: no client authentication → 401', async () => {
      err(await token('oa', { grant_type: 'client_credentials' }), 401, 'invalid_client');
    });
    test('invalid_request: grant_type missing → 400', async () => {
      err(await token('oa', {}, { authorization: basic('app1', SECRET1) }), 400, 'invalid_request');
    });
    test('invalid_request: a parameter given twice → 400', async () => {
      const a = await postForm(`${gw.gateway}/oa/oauth/token`, {}, { authorization: basic('app1', SECRET1) });
      expect(a.status).toBe(400);
      const twice = await (
        await import('undici')
      ).request(`${gw.gateway}/oa/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic('app1', SECRET1) },
        body: 'grant_type=client_credentials&grant_type=client_credentials',
      });
      expect(twice.statusCode).toBe(400);
      expect((JSON.parse(await twice.body.text()) as { error: string }).error).toBe('invalid_request');
    });
    test('invalid_request: a body that is not form-encoded → 400', async () => {
      const a = await postJson(
        `${gw.gateway}/oa/oauth/token`,
        { grant_type: 'client_credentials' },
        { authorization: basic('app1', SECRET1) },
      );
      err(a, 400, 'invalid_request');
    });
    test('unsupported_grant_type → 400', async () => {
      err(
        await token(
          'oa',
          { grant_type: 'password', username: 'u', password: 'p' },
          { authorization: basic('app1', SECRET1) },
        ),
        400,
        'unsupported_grant_type',
      );
    });
    test('unauthorized_client: a grant the API does not allow → 400', async () => {
      const a = await token('cc', {
        grant_type: 'authorization_code',
        code: 'x',
        redirect_uri: 'https://app.example/cb',
        client_id: 'cc1',
        client_secret: CC_SECRET,
      });
      err(a, 400, 'unauthorized_client');
    });
    test('invalid_grant: an unknown code → 400', async () => {
      const a = await token(
        'oa',
        { grant_type: 'authorization_code', code: 'nope', redirect_uri: 'https://app.example/cb' },
        { authorization: basic('app1', SECRET1) },
      );
      err(a, 400, 'invalid_grant');
    });
    test('invalid_grant: an unknown refresh token → 400', async () => {
      err(
        await token(
          'oa',
          { grant_type: 'refresh_token', refresh_token: 'nope' },
          { authorization: basic('app1', SECRET1) },
        ),
        400,
        'invalid_grant',
      );
    });
  });

  /** authorize (gateway) → consent (facade authorize-client) → code. */
  async function code(o: { challenge?: string; redirect?: string } = {}): Promise<string> {
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: 'app1',
      redirect_uri: 'https://app.example/cb',
      state: 'st-1',
    });
    if (o.challenge) {
      q.set('code_challenge', o.challenge);
      q.set('code_challenge_method', 'S256');
    }
    const auth = await get(`${gw.gateway}/oa/oauth/authorize?${q}`);
    expect(auth.status).toBe(307);
    expect(auth.headers.location).toBe(`https://login.example/consent?from=gw&${q}`);
    const body: Record<string, string> = {
      api_id: 'oa',
      client_id: 'app1',
      redirect_uri: o.redirect ?? 'https://app.example/cb',
      response_type: 'code',
      state: 'st-1',
    };
    if (o.challenge) Object.assign(body, { code_challenge: o.challenge, code_challenge_method: 'S256' });
    const consent = seen(await postJson(`${gw.admin}/gw/oauth/authorize-client`, body, GW));
    expect(consent.status).toBe(200);
    const to = new URL(consent.body.redirect_to as string);
    expect(to.origin + to.pathname).toBe('https://app.example/cb');
    expect(to.searchParams.get('state')).toBe('st-1');
    expect(to.searchParams.get('code')).toBe(consent.body.code);
    return consent.body.code as string;
  }
  const redeem = (c: string, extra: Record<string, string> = {}) =>
    token(
      'oa',
      { grant_type: 'authorization_code', code: c, redirect_uri: 'https://app.example/cb', ...extra },
      { authorization: basic('app1', SECRET1) },
    );
  const refresh = (rt: string) =>
    token('oa', { grant_type: 'refresh_token', refresh_token: rt }, { authorization: basic('app1', SECRET1) });

  test('authorize: a wrong redirect_uri or client is a 400 JSON, never a redirect', async () => {
    const bad = await get(
      `${gw.gateway}/oa/oauth/authorize?response_type=code&client_id=app1&redirect_uri=${encodeURIComponent('https://evil.example/cb')}`,
    );
    expect(bad.status).toBe(400);
    expect(bad.headers.location).toBeUndefined();
    expect(bad.body.error).toBe('invalid_request');
    const unknown = await get(`${gw.gateway}/oa/oauth/authorize?response_type=code&client_id=nobody`);
    expect(unknown.status).toBe(400);
    expect(unknown.headers.location).toBeUndefined();
    const plain = await get(
      `${gw.gateway}/oa/oauth/authorize?response_type=code&client_id=app1&code_challenge=abc&code_challenge_method=plain`,
    );
    expect(plain.status).toBe(400);
    const consent = await postJson(
      `${gw.admin}/gw/oauth/authorize-client`,
      { api_id: 'oa', client_id: 'app1', redirect_uri: 'https://evil.example/cb', response_type: 'code' },
      GW,
    );
    expect(consent.status).toBe(400);
    expect(
      (
        await postJson(`${gw.admin}/gw/oauth/authorize-client`, {
          api_id: 'oa',
          client_id: 'app1',
          redirect_uri: 'https://app.example/cb',
          response_type: 'code',
        })
      ).status,
    ).toBe(401);
  });

  test('authorization_code with PKCE S256: tokens; a wrong or missing verifier is invalid_grant', async () => {
    const p = pkce();
    const wrong = await redeem(await code({ challenge: p.challenge }), { code_verifier: pkce().verifier });
    expect({ status: wrong.status, error: wrong.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    const missing = await redeem(await code({ challenge: p.challenge }));
    expect({ status: missing.status, error: missing.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    const ok = await redeem(await code({ challenge: p.challenge }), { code_verifier: p.verifier });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ token_type: 'bearer', expires_in: 3600 });
    expect(typeof ok.body.refresh_token).toBe('string');
    expect((await callOa(ok.body.access_token as string)).status).toBe(200);
  });

  test("a redirect_uri at the token endpoint that is not the authorization's is invalid_grant", async () => {
    const c = await code();
    const a = await token(
      'oa',
      { grant_type: 'authorization_code', code: c, redirect_uri: 'https://app.example/other' },
      { authorization: basic('app1', SECRET1) },
    );
    expect({ status: a.status, error: a.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
  });

  test('a code is single use: redeemed again it is invalid_grant and the first tokens are revoked', async () => {
    const c = await code();
    const first = await redeem(c);
    expect(first.status).toBe(200);
    expect((await callOa(first.body.access_token as string)).status).toBe(200);
    const again = await redeem(c);
    expect({ status: again.status, error: again.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    expect((await callOa(first.body.access_token as string)).status).toBe(401);
    expect((await refresh(first.body.refresh_token as string)).status).toBe(400);
  });

  test('refresh_token: rotated; the used one presented again revokes every token issued from it', async () => {
    const first = await redeem(await code());
    const second = await refresh(first.body.refresh_token as string);
    expect(second.status).toBe(200);
    expect(second.body.refresh_token).not.toBe(first.body.refresh_token);
    const third = await refresh(second.body.refresh_token as string);
    expect(third.status).toBe(200);
    expect((await callOa(third.body.access_token as string)).status).toBe(200);
    // replay of a used refresh token
    const replay = await refresh(first.body.refresh_token as string);
    expect({ status: replay.status, error: replay.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    expect((await callOa(third.body.access_token as string)).status).toBe(401);
    expect((await refresh(third.body.refresh_token as string)).status).toBe(400);
  });

  test('revoke (RFC 7009): the access token stops working; unknown tokens are a 200 too', async () => {
    const t = await cc();
    const at = t.body.access_token as string;
    expect((await callOa(at)).status).toBe(200);
    const r = await postForm(`${gw.gateway}/oa/oauth/revoke`, { token: at }, { authorization: basic('app1', SECRET1) });
    expect(r.status).toBe(200);
    expect((await callOa(at)).status).toBe(401);
    expect(
      (await postForm(`${gw.gateway}/oa/oauth/revoke`, { token: 'unknown' }, { authorization: basic('app1', SECRET1) }))
        .status,
    ).toBe(200);
    expect((await postForm(`${gw.gateway}/oa/oauth/revoke`, { token: at })).status).toBe(401);
  });

  test('introspect (RFC 7662) on the facade: JSON or form', async () => {
    const t = await cc();
    const on = await postJson(`${gw.admin}/gw/oauth/introspect`, { token: t.body.access_token }, GW);
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ active: true, client_id: 'app1', api_id: 'oa', token_type: 'bearer' });
    expect((on.body.exp as number) - (on.body.iat as number)).toBe(3600);
    const form = await postForm(`${gw.admin}/gw/oauth/introspect`, { token: 'nope' }, GW);
    expect(form.body).toEqual({ active: false });
    expect((await postJson(`${gw.admin}/gw/oauth/introspect`, { token: 'x' })).status).toBe(401);
  });

  test('an expired access token (access_token_expires: 1) is invalid_token', async () => {
    const t = await token('cc', { grant_type: 'client_credentials', client_id: 'cc1', client_secret: CC_SECRET });
    expect(t.body.expires_in).toBe(1);
    await eventually(
      async () => (await get(`${gw.gateway}/cc/x`, bearer(t.body.access_token as string))).status === 401,
      5000,
      'expiry',
    );
  });

  const limToken = async (id: string, secret: string) =>
    (await token('lim', { grant_type: 'client_credentials' }, { authorization: basic(id, secret) })).body
      .access_token as string;
  const callLim = (t: string) => get(`${gw.gateway}/lim/x`, bearer(t));

  test("one allowance per client: the policy's rate 3/60 across two tokens of app2", async () => {
    const a = await limToken('app2', SECRET2);
    const b = await limToken('app2', SECRET2);
    const statuses = [];
    for (const t of [a, b, a, b, a]) statuses.push((await callLim(t)).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    // another client of the same policy has its own allowance
    expect((await callLim(await limToken('app3', SECRET1))).status).toBe(200);
  });

  test('a changed policy applies at the next request', async () => {
    const t = await limToken('app3', SECRET1);
    expect((await callLim(t)).headers['x-ratelimit-limit']).toBe('3');
    const file = join(dir, 'lim.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('{rate: 3, per: 60}', '{rate: 50, per: 60}'));
    await eventually(async () => (await callLim(t)).headers['x-ratelimit-limit'] === '50', 5000, 'the new policy');
  });

  test('failed client authentications are limited per client (429)', async () => {
    let last: Answer | undefined;
    for (let i = 0; i < 12; i++)
      last = await token('cc', { grant_type: 'client_credentials', client_id: 'cc1', client_secret: 'guess' });
    expect(last!.status).toBe(429);
    expect(Number(last!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // the right secret is refused too while the client is blocked
    expect(
      (await token('cc', { grant_type: 'client_credentials', client_id: 'cc1', client_secret: CC_SECRET })).status,
    ).toBe(429);
  });

  test('a client created and deleted through the facade: its tokens die with it', async () => {
    const created = seen(await createClient(gw.admin, 'oa', 'made', 'https://made.example/cb', MGMT));
    expect(created.status).toBe(200);
    const secret = created.body.secret as string;
    let at = '';
    await eventually(
      async () => {
        const t = await cc('made', secret);
        at = (t.body.access_token as string) ?? '';
        return t.status === 200;
      },
      3000,
      'the new client',
    );
    expect((await callOa(at)).status).toBe(200);
    expect((await del(`${gw.admin}/api/apis/oauth/oa/made`, MGMT)).status).toBe(200);
    await eventually(async () => (await callOa(at)).status === 401, 1000, 'revocation within 1 s');
  });

  test('the facade refuses a redirect_uri that is not https or loopback http', async () => {
    for (const u of ['javascript:alert(1)', 'http://evil.example/cb', 'https://app.example/cb#frag', '/relative']) {
      const r = await postJson(`${gw.admin}/api/apis/oauth/oa`, { redirect_uri: u }, MGMT);
      expect({ u, status: r.status }).toEqual({ u, status: 400 });
    }
    const loop = seen(
      await postJson(
        `${gw.admin}/api/apis/oauth/oa`,
        { client_id: 'native', redirect_uri: 'http://127.0.0.1:8765/cb' },
        MGMT,
      ),
    );
    expect(loop.status).toBe(200);
  });

  test('no raw token, code or secret in log lines, metric labels or files under DIR', async () => {
    const metrics = (await get(`${gw.admin}/metrics`)).text;
    expect(metrics).toMatch(/gw_oauth_tokens_issued_total\{api="oa",grant="client_credentials"\} \d+/);
    expect(metrics).toMatch(/gw_oauth_token_errors_total\{api="oa",error="invalid_grant"\} \d+/);
    const files = (d: string): string[] =>
      readdirSync(d, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(d, e.name)) : [join(d, e.name)],
      );
    const texts = {
      logs: gw.output(),
      metrics,
      ...Object.fromEntries(
        files(dir)
          .map((f): [string, string] => [f, readFileSync(f, 'utf8')])
          .filter(([, text]) => !text.includes('kind: Secret')), // Secrets hold client secrets, as in a cluster
      ),
    };
    expect(raw.length).toBeGreaterThan(20);
    for (const [where, text] of Object.entries(texts))
      for (const r of raw) expect({ where, found: text.includes(r) }).toEqual({ where, found: false });
    expect(readdirSync(join(dir, '.gw'))).toContain('.oauth-tokens.json');
  });
  test('a restart loses no token', async () => {
    const t = (await cc('app1', SECRET1)).body.access_token as string;
    expect((await callOa(t)).status).not.toBe(401);
    const out = gw.output();
    gw = await st.restart();
    (gw as { output: () => string }).output = (
      (o2) => () =>
        out + o2()
    )(gw.output);
    expect((await callOa(t)).status).not.toBe(401);
  });
});
