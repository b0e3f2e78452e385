/**
 * `gw oauth authorize` and `gw oauth introspect`: the real `gw` binary against the admin listener of a real
 * `gw standalone`: a code obtained through the CLI is redeemed at the gateway, a token introspected (as an
 * argument and from stdin), and every exit code of the table these commands can reach.
 */
import { Exit } from '../../../cli/client/exit-codes.js';
import { freePort } from '../../harness/ports.js';
import { expectFailure, runGw, type Run } from '../../helpers/gw-cli.js';
import {
  basic,
  bearer,
  get,
  oaManifests,
  pkce,
  postForm,
  startOAuthStandalone,
  type OAuthStandalone,
} from '../../helpers/oauth.js';
import type { Standalone } from '../../helpers/standalone.js';

const SECRET = 'cli-app-secret-0123456789abcdef';
const CB = 'https://app.example/cb';

/** Each test spawns the real binary several times (on a shared 2-core machine): a longer timeout. */
const slow = (name: string, fn: () => Promise<void>): void => test(name, fn, 60_000);

describe('gw oauth authorize | introspect (CLI against a facade)', () => {
  let st: OAuthStandalone;
  let sa: Standalone;
  const gw = (args: string[], o: { env?: Record<string, string | undefined>; stdin?: string; url?: string } = {}) =>
    runGw(args, {
      url: o.url ?? sa.admin,
      env: { GW_SECRET: 'test-secret', ...o.env },
      ...(o.stdin !== undefined ? { stdin: o.stdin } : {}),
    });
  /** `gw oauth authorize oa app1 --redirect-uri CB …extra` */
  const authorize = (extra: string[] = [], o: Parameters<typeof gw>[1] = {}) =>
    gw(['oauth', 'authorize', 'oa', 'app1', '--redirect-uri', CB, ...extra], o);
  const ok = (r: Run): Record<string, unknown> => {
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: Exit.OK, stderr: '' });
    return r.json as Record<string, unknown>;
  };
  const redeem = (code: string, verifier: string) =>
    postForm(
      `${sa.gateway}/oa/oauth/token`,
      { grant_type: 'authorization_code', code, redirect_uri: CB, code_verifier: verifier },
      { authorization: basic('app1', SECRET) },
    );
  const cc = async (): Promise<string> => {
    const t = await postForm(
      `${sa.gateway}/oa/oauth/token`,
      { grant_type: 'client_credentials' },
      { authorization: basic('app1', SECRET) },
    );
    expect(t.status).toBe(200);
    return t.body.access_token as string;
  };

  beforeAll(async () => {
    st = await startOAuthStandalone((target) => ({
      'oa.yaml': oaManifests(target, [{ name: 'app1', id: 'app1', secret: SECRET, redirect: CB }]),
    }));
    sa = st.sa;
  });
  afterAll(async () => {
    await st?.stop();
  });

  slow(
    'authorize with flags: exit 0, {code, redirect_to}; the code (PKCE S256) is redeemed at the gateway',
    async () => {
      const p = pkce();
      const out = ok(await authorize(['--state', 'st-1', '--code-challenge', p.challenge]));
      const to = new URL(out.redirect_to as string);
      expect(to.origin + to.pathname).toBe(CB);
      expect(to.searchParams.get('state')).toBe('st-1');
      expect(to.searchParams.get('code')).toBe(out.code);
      // the challenge went with it (S256 by default): another code of the same challenge, a wrong verifier: refused
      const other = ok(await authorize(['--code-challenge', p.challenge]));
      const refused = await redeem(other.code as string, pkce().verifier);
      expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
      const t = await redeem(out.code as string, p.verifier);
      expect(t.status).toBe(200);
      expect((await get(`${sa.gateway}/oa/x`, bearer(t.body.access_token as string))).status).toBe(200);
    },
  );

  slow('authorize with --body from stdin; a flag wins over the body', async () => {
    const body = JSON.stringify({ redirect_uri: 'https://evil.example/cb', state: 'from-body' });
    const out = ok(
      await gw(['oauth', 'authorize', 'oa', 'app1', '--body', '-', '--redirect-uri', CB], { stdin: body }),
    );
    expect(new URL(out.redirect_to as string).searchParams.get('state')).toBe('from-body');
    const wrong = await gw(['oauth', 'authorize', 'oa', 'app1', '--body', '-'], { stdin: body });
    expectFailure(wrong, Exit.REFUSED, /^gw oauth authorize: HTTP 400: invalid_request: redirect_uri/);
  });

  slow('authorize failures: usage 1, unknown API 2, credential 3, refused 4, facade down 5', async () => {
    expectFailure(await gw(['oauth', 'authorize', 'oa', 'app1']), Exit.USAGE, /--redirect-uri/);
    expectFailure(await gw(['oauth', 'authorize', 'nope', 'app1', '--redirect-uri', CB]), Exit.NOT_FOUND, /HTTP 404/);
    expectFailure(await authorize([], { env: { GW_SECRET: undefined } }), Exit.AUTH, /GW_SECRET/);
    expectFailure(await authorize(['--secret', 'wrong']), Exit.AUTH, /HTTP 403/);
    expectFailure(
      await authorize(['--code-challenge', 'abc', '--code-challenge-method', 'plain']),
      Exit.REFUSED,
      /HTTP 400: invalid_request: code_challenge_method/,
    );
    expectFailure(
      await gw(['oauth', 'authorize', 'oa', 'nobody', '--redirect-uri', CB]),
      Exit.REFUSED,
      /HTTP 400: invalid_request: client_id/,
    );
    const closed = `http://127.0.0.1:${await freePort()}`;
    expectFailure(await authorize([], { url: closed }), Exit.UNAVAILABLE, /./);
  });

  slow(
    'introspect: a token as the argument or from stdin (-) → exit 0 with what it is; unknown → active false',
    async () => {
      const t = await cc();
      const byArg = ok(await gw(['oauth', 'introspect', t]));
      expect(byArg).toMatchObject({ active: true, client_id: 'app1', api_id: 'oa', token_type: 'bearer' });
      expect((byArg.exp as number) - (byArg.iat as number)).toBe(3600);
      expect(ok(await gw(['oauth', 'introspect', '-'], { stdin: `${t}\n` }))).toEqual(byArg);
      expect(ok(await gw(['oauth', 'introspect', 'no-such-token']))).toEqual({ active: false });
      // a base64url token may begin with "-": it is the token, never an unknown option echoed to stderr
      expect(ok(await gw(['oauth', 'introspect', '-9TbjAw_not-a-token']))).toEqual({ active: false });
      expect(ok(await gw(['oauth', 'introspect', `-${t}`]))).toEqual({ active: false });
      // revoked at the gateway → inactive
      await postForm(`${sa.gateway}/oa/oauth/revoke`, { token: t }, { authorization: basic('app1', SECRET) });
      expect(ok(await gw(['oauth', 'introspect', t]))).toEqual({ active: false });
    },
  );

  slow('introspect failures: empty stdin 1, credential 3; the token is never echoed on stderr', async () => {
    expectFailure(await gw(['oauth', 'introspect', '-'], { stdin: '' }), Exit.USAGE, /stdin: no token/);
    const t = await cc();
    const wrong = await gw(['oauth', 'introspect', t, '--secret', 'wrong']);
    expectFailure(wrong, Exit.AUTH, /HTTP 403/);
    expect(wrong.stderr).not.toContain(t);
    expectFailure(await gw(['oauth', 'introspect', t], { env: { GW_SECRET: undefined } }), Exit.AUTH, /GW_SECRET/);
  });
});
