/**
 * Tokens per client (docs/oauth.md, "Tokens per client") through `gw standalone` and real HTTP: with
 * `oauth_meta.max_tokens_per_client: 3`, a fourth token revokes the first (401 invalid_token), the newest
 * three work, and after a restart of the process the same tokens work and fail, and the bound still
 * counts them (the next token revokes the oldest survivor). The journal is the file that grows, not the state.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { oauthManifests, postForm, startOAuthStandalone, type OAuthStandalone } from '../../helpers/oauth.js';

const SECRET = 'bound-secret-0123456789abcdef';

describe('gw standalone: live tokens per client are bounded, oldest first, across a restart', () => {
  let st: OAuthStandalone;
  beforeAll(async () => {
    st = await startOAuthStandalone((target) => ({
      'oauth.yaml': oauthManifests({
        api: 'oa',
        target,
        policy: 'roomy',
        rate: 1000,
        per: 60,
        meta: '{max_tokens_per_client: 3}',
        clients: [
          { name: 'app', id: 'app', secret: SECRET },
          { name: 'other', id: 'other', secret: SECRET },
        ],
      }),
    }));
  });
  afterAll(() => st?.stop());

  const issue = async (id = 'app'): Promise<string> => {
    const r = await postForm(`${st.sa.gateway}/oa/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: id,
      client_secret: SECRET,
    });
    expect(r.status).toBe(200);
    return r.body.access_token as string;
  };
  const status = async (token: string): Promise<number> => {
    const r = await request(`${st.sa.gateway}/oa/x`, { headers: { authorization: `Bearer ${token}` } });
    await r.body.dump();
    return r.statusCode;
  };
  const statuses = (tokens: string[]): Promise<number[]> => Promise.all(tokens.map(status));

  test('a fourth token revokes the first; the newest three and another client’s token work', async () => {
    const other = await issue('other');
    const t = [await issue(), await issue(), await issue()];
    expect(await statuses(t)).toEqual([200, 200, 200]);
    t.push(await issue());
    expect(await statuses(t)).toEqual([401, 200, 200, 200]);
    t.push(await issue());
    expect(await statuses(t)).toEqual([401, 401, 200, 200, 200]);
    expect(await status(other)).toBe(200);

    const gwDir = join(st.dir, '.gw');
    const journal = readdirSync(gwDir).find((f) => f.startsWith('.oauth-tokens-') && f.endsWith('.log'))!;
    expect(statSync(join(gwDir, journal)).size).toBeGreaterThan(0);

    await st.restart();
    expect(await statuses(t)).toEqual([401, 401, 200, 200, 200]);
    expect(await status(other)).toBe(200);
    t.push(await issue());
    expect(await statuses(t)).toEqual([401, 401, 401, 200, 200, 200]);
  });
});
