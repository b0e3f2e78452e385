/**
 * HTTP helpers of the OAuth tests: form posts to the token endpoints, bearer calls, PKCE pairs; the
 * manifests of an OAuth API; a `gw standalone` serving OAuth APIs from a directory of its own.
 */
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { cleanup, startStandalone, tempDir, type Standalone } from './standalone.js';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
  text: string;
}

async function answer(r: Awaited<ReturnType<typeof request>>): Promise<Answer> {
  const text = await r.body.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    /* not JSON */
  }
  return { status: r.statusCode, headers: r.headers, body, text };
}

export const basic = (id: string, secret: string): string =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

/** POST a form (application/x-www-form-urlencoded). */
export async function postForm(
  url: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return answer(
    await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form).toString(),
    }),
  );
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return answer(
    await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }),
  );
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return answer(await request(url, { headers }));
}

export async function del(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return answer(await request(url, { method: 'DELETE', headers }));
}

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

type ClientManifest = { name: string; id: string; secret: string; redirect?: string; policy?: string };

/**
 * POST {base}/api/apis/oauth/{api}: client `clientId` (policy `policy`, `redirectUri`) created through the
 * management API — the facade's, or standalone's admin listener.
 */
export const createClient = (
  base: string,
  api: string,
  clientId: string,
  redirectUri: string,
  headers: Record<string, string>,
  policy = 'tight',
): Promise<Answer> =>
  postJson(
    `${base}/api/apis/oauth/${api}`,
    { client_id: clientId, policy_id: policy, redirect_uri: redirectUri },
    headers,
  );

/** ApiDefinition + Policy + Secret + OAuthClient manifests of one OAuth API (classic form). */
export function oauthManifests(o: {
  api: string;
  /** The API's listen path; `/<api>/` when not given. */
  listen?: string;
  target: string;
  policy: string;
  rate: number;
  per: number;
  quota?: number;
  clients: ClientManifest[];
  meta?: string;
  ns?: string;
}): string {
  const ns = o.ns ? `, namespace: ${o.ns}` : '';
  const docs = [
    `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${o.api}${ns}}
spec:
  use_oauth2: true
  oauth_meta: ${o.meta ?? '{auth_login_redirect: "https://login.example/consent?from=gw"}'}
  proxy: {listen_path: ${o.listen ?? `/${o.api}/`}, target_url: ${o.target}}`,
    `apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: ${o.policy}${ns}}
spec: {rate: ${o.rate}, per: ${o.per}${o.quota !== undefined ? `, quota_max: ${o.quota}, quota_renewal_rate: 3600` : ''}}`,
  ];
  for (const c of o.clients) {
    docs.push(`apiVersion: v1
kind: Secret
metadata: {name: ${c.name}-secret${ns}}
stringData: {secret: ${c.secret}}`);
    docs.push(`apiVersion: gw.io/v1alpha1
kind: OAuthClient
metadata: {name: ${c.name}${ns}}
spec:
  api_id: ${o.api}
  client_id: ${c.id}
  policy_id: ${c.policy ?? o.policy}
  redirect_uri: ${c.redirect ?? 'https://app.example/cb'}
  secretRef: {name: ${c.name}-secret, key: secret}`);
  }
  return docs.join('\n---\n') + '\n';
}

/** The API every OAuth suite serves: `oa` on /oa/, every grant, policy `roomy` (1,000 per 60 s). */
export const oaManifests = (target: string, clients: ClientManifest[]): string =>
  oauthManifests({ api: 'oa', target, policy: 'roomy', rate: 1000, per: 60, clients });

export interface OAuthStandalone {
  echo: { server: Server; url: string };
  dir: string;
  sa: Standalone;
  /** Stops `sa` and starts it again on the same directory (its tokens persisted there); it becomes `sa`. */
  restart(): Promise<Standalone>;
  stop(): Promise<void>;
}

/** An echo upstream and `gw standalone` (`args`, `env`) on a new directory of `files(echo URL)` (file name → YAML). */
export async function startOAuthStandalone(
  files: (target: string) => Record<string, string>,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<OAuthStandalone> {
  const echo = await startEcho();
  const dir = tempDir('gw-oauth-');
  for (const [name, text] of Object.entries(files(echo.url))) writeFileSync(join(dir, name), text);
  const st: OAuthStandalone = {
    echo,
    dir,
    sa: undefined as unknown as Standalone,
    async restart() {
      await st.sa.stop();
      return (st.sa = await startStandalone(dir, args, env));
    },
    async stop() {
      await st.sa?.stop();
      echo.server.close();
      cleanup(dir);
    },
  };
  try {
    st.sa = await startStandalone(dir, args, env);
  } catch (e) {
    await st.stop();
    throw e;
  }
  return st;
}
