/**
 * OAuth client lockout (docs/oauth.md, "Guessing"), end to end in `gw standalone`: wrong secrets for a
 * known client_id from one address lock that address out for that client, never the real client from
 * another address — token, refresh and revocation keep working there.
 */
import { Agent, request } from 'undici';
import type { Standalone } from '../../helpers/standalone.js';
import { basic, oaManifests, postJson, startOAuthStandalone, type OAuthStandalone } from '../../helpers/oauth.js';

const SECRET = 'lock-secret-0123456789abcdef';
const GW = { 'x-gw-authorization': 'test-secret' };

describe('an unauthenticated guesser cannot lock an OAuth client out', () => {
  let st: OAuthStandalone;
  let gw: Standalone;
  const attacker = new Agent({ localAddress: '127.0.0.2' });
  const client = new Agent({ localAddress: '127.0.0.1' });

  beforeAll(async () => {
    st = await startOAuthStandalone((target) => ({
      'oa.yaml': oaManifests(target, [{ name: 'app1', id: 'app1', secret: SECRET }]),
    }));
    gw = st.sa;
  });
  afterAll(async () => {
    await st.stop();
    await attacker.close();
    await client.close();
  });

  const post = async (from: Agent, path: string, form: Record<string, string>, secret: string) => {
    const r = await request(`${gw.gateway}/oa/oauth/${path}`, {
      method: 'POST',
      dispatcher: from,
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic('app1', secret) },
      body: new URLSearchParams(form).toString(),
    });
    const text = await r.body.text();
    return { status: r.statusCode, body: JSON.parse(text) as Record<string, unknown>, retry: r.headers['retry-after'] };
  };

  /** A refresh token of app1: authorize-client consent → code → token (from the client's address). */
  async function refreshToken(): Promise<string> {
    const consent = await postJson(
      `${gw.admin}/gw/oauth/authorize-client`,
      { api_id: 'oa', client_id: 'app1', redirect_uri: 'https://app.example/cb', response_type: 'code' },
      GW,
    );
    expect(consent.status).toBe(200);
    const t = await post(
      client,
      'token',
      { grant_type: 'authorization_code', code: consent.body.code as string, redirect_uri: 'https://app.example/cb' },
      SECRET,
    );
    expect(t.status).toBe(200);
    return t.body.refresh_token as string;
  }

  test('12 wrong secrets from 127.0.0.2: that address is refused (right secret too); 127.0.0.1 gets tokens, refreshes and revokes', async () => {
    const rt = await refreshToken();
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++)
      statuses.push((await post(attacker, 'token', { grant_type: 'client_credentials' }, `wrong-${i}`)).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual([429, 429]);

    const locked = await post(attacker, 'token', { grant_type: 'client_credentials' }, SECRET);
    expect(locked.status).toBe(429);
    expect(Number(locked.retry)).toBeGreaterThanOrEqual(1);
    expect((await post(attacker, 'revoke', { token: 'x' }, SECRET)).status).toBe(429);

    const issued = await post(client, 'token', { grant_type: 'client_credentials' }, SECRET);
    expect(issued.status).toBe(200);
    const refreshed = await post(client, 'token', { grant_type: 'refresh_token', refresh_token: rt }, SECRET);
    expect(refreshed.status).toBe(200);
    const revoked = await post(client, 'revoke', { token: issued.body.access_token as string }, SECRET);
    expect(revoked.status).toBe(200);
  });
});
