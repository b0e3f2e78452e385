/**
 * `gw facade` under the chart's own Role (docs/helm.md "RBAC"), on the real kube-apiserver: the chart's
 * gw-facade ServiceAccount, Role and RoleBinding are rendered and applied, and the facade runs with a
 * token of that ServiceAccount (TokenRequest), beside `gw controller`. Its OAuth clients' secrets live in
 * one Secret (gw-facade-oauth-clients, one key per client, created empty by the chart), the only Secret its
 * Role can read or change, and it may create none:
 * creating, reading, listing and deleting clients work; a client applied by hand, whose Secret is its
 * own, is listed and read without its secret (the Role does not reach that Secret), and no other Secret
 * of the namespace can be read, listed or deleted.
 */
import { jest } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { FACADE_CLIENT_SECRETS, clientResourceName } from '../../../facade/backend.js';
import { helm } from '../../helpers/chart-tools.js';
import { freshNamespace, kubectl } from '../../helpers/kube.js';
import { freePort } from '../../harness/ports.js';
import { spawnServer, type ServerProcess } from '../../helpers/server-process.js';
import { cleanup, tempDir } from '../../helpers/standalone.js';
import { oauthManifests } from '../../helpers/oauth.js';
import { getJson, startController, type Controller } from '../operator/helpers.js';

jest.setTimeout(120_000);

const TOKEN = 'facade-rbac-token-0123456789';
const HAND_SECRET = 'by-hand-secret-0123456789abcdef';

describe('gw facade with the chart’s Role: its one Secret of client secrets, no other', () => {
  let ns: string;
  let dir: string;
  let ctl: Controller;
  let facade: ServerProcess;
  /** The chart's empty Secret of client secrets, as rendered. */
  let chartSecret = '';
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${facade.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> | Record<string, unknown>[] };
  };
  const asSa = (...args: string[]) =>
    kubectl(['auth', 'can-i', ...args, '-n', ns, '--as', `system:serviceaccount:${ns}:gw-facade`]);

  beforeAll(async () => {
    ns = await freshNamespace('fac-rbac');
    dir = tempDir('gw-facade-rbac-');
    const applied = await kubectl(
      ['apply', '-n', ns, '-f', '-'],
      oauthManifests({
        api: 'oa',
        target: 'http://127.0.0.1:9',
        policy: 'roomy',
        rate: 1000,
        per: 60,
        clients: [{ name: 'by-hand', id: 'by-hand', secret: HAND_SECRET }],
      }),
    );
    if (applied.code !== 0) throw new Error(applied.stderr);
    // the chart's facade identity, as `helm install` would create it
    const r = await helm(['template', 'gw', resolve('helm/gw'), '--namespace', ns, '--set', `facade.namespace=${ns}`]);
    if (r.code !== 0) throw new Error(r.stderr);
    const docs = parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as { kind: string; metadata: { name: string } } | null)
      .filter((d): d is { kind: string; metadata: { name: string } } => d !== null)
      .filter(
        (d) =>
          (['ServiceAccount', 'Role', 'RoleBinding'].includes(d.kind) && d.metadata.name === 'gw-facade') ||
          (d.kind === 'Secret' && d.metadata.name === FACADE_CLIENT_SECRETS),
      );
    // with the empty Secret of client secrets, which the facade only replaces (it may not create Secrets)
    expect(docs.map((d) => d.kind).sort()).toEqual(['Role', 'RoleBinding', 'Secret', 'ServiceAccount']);
    chartSecret = stringify(docs.find((d) => d.kind === 'Secret'));
    const rbac = await kubectl(['apply', '-n', ns, '-f', '-'], docs.map((d) => stringify(d)).join('---\n'));
    if (rbac.code !== 0) throw new Error(rbac.stderr);
    const token = await kubectl(['create', 'token', 'gw-facade', '-n', ns, '--duration', '1h']);
    if (token.code !== 0) throw new Error(token.stderr);
    const server = /server: (\S+)/.exec(
      (await kubectl(['config', 'view', '--minify', '-o', 'jsonpath=server: {.clusters[0].cluster.server}'])).stdout,
    )![1]!;
    const kc = join(dir, 'kubeconfig');
    writeFileSync(
      kc,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'gw-facade', user: { token: token.stdout.trim() } }],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'gw-facade' } }],
        'current-context': 'c',
      }),
    );
    writeFileSync(join(dir, 'facade.yaml'), stringify({ secret: 'facade-rbac-secret', access_tokens: [TOKEN] }));
    ctl = await startController(ns);
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    facade = await spawnServer(
      'facade',
      [
        'facade',
        '--kubeconfig',
        kc,
        '--namespace',
        ns,
        '--config',
        join(dir, 'facade.yaml'),
        '--listen',
        `127.0.0.1:${port}`,
      ],
      url,
      url,
    );
  });
  afterAll(async () => {
    await facade?.stop();
    await ctl?.stop();
    if (dir) cleanup(dir);
  });

  test('the Role reaches the chart’s Secret of client secrets by name only: no create, no other Secret', async () => {
    for (const [verb, what, want] of [
      ['get', `secrets/${FACADE_CLIENT_SECRETS}`, 'yes'],
      ['update', `secrets/${FACADE_CLIENT_SECRETS}`, 'yes'],
      ['create', 'secrets', 'no'],
      ['create', `secrets/${FACADE_CLIENT_SECRETS}`, 'no'],
      ['get', 'secrets/by-hand-secret', 'no'],
      ['list', 'secrets', 'no'],
      ['delete', `secrets/${FACADE_CLIENT_SECRETS}`, 'no'],
      ['delete', 'secrets/by-hand-secret', 'no'],
    ] as const)
      expect([verb, what, (await asSa(verb, what)).stdout.trim()]).toEqual([verb, what, want]);
  });

  test('create, read, list and delete clients under that Role; a hand-applied client is shown without its secret', async () => {
    const a = await call('POST', '/api/apis/oauth/oa', { client_id: 'made-a' });
    expect(a.status).toBe(200);
    const b = await call('POST', '/api/apis/oauth/oa', { client_id: 'made-b' });
    expect(b.status).toBe(200);
    const secretA = (a.body as Record<string, unknown>).secret as string;
    const nameA = clientResourceName(ns, 'oa', 'made-a');
    const nameB = clientResourceName(ns, 'oa', 'made-b');
    const shared = (await getJson(ns, 'secret', FACADE_CLIENT_SECRETS)) as { data: Record<string, string> };
    expect(Object.keys(shared.data).sort()).toEqual([nameA, nameB].sort());
    expect(Buffer.from(shared.data[nameA]!, 'base64').toString('utf8')).toBe(secretA);

    expect(await call('GET', '/api/apis/oauth/oa/made-a')).toMatchObject({ status: 200, body: { secret: secretA } });
    const hand = await call('GET', '/api/apis/oauth/oa/by-hand');
    expect(hand.status).toBe(200);
    expect(hand.body).toMatchObject({ client_id: 'by-hand' });
    expect((hand.body as Record<string, unknown>).secret ?? '').toBe(''); // as for a secret that cannot be read
    expect(JSON.stringify(hand.body)).not.toContain(HAND_SECRET);
    const list = await call('GET', '/api/apis/oauth/oa');
    expect(list.status).toBe(200);
    expect((list.body as Record<string, unknown>[]).map((c) => c.client_id).sort()).toEqual([
      'by-hand',
      'made-a',
      'made-b',
    ]);

    expect((await call('DELETE', '/api/apis/oauth/oa/made-a')).status).toBe(200);
    const after = (await getJson(ns, 'secret', FACADE_CLIENT_SECRETS)) as { data: Record<string, string> };
    expect(Object.keys(after.data)).toEqual([nameB]);
    expect((await call('GET', '/api/apis/oauth/oa/made-a')).status).toBe(404);
    // the hand-applied client's Secret is untouched
    expect(await getJson(ns, 'secret', 'by-hand-secret')).toBeDefined();
  });

  test('without the chart’s Secret a client create is refused with 503 naming it, nothing written; recreated, it works again', async () => {
    const del = await kubectl(['delete', 'secret', FACADE_CLIENT_SECRETS, '-n', ns]);
    expect(del.code).toBe(0);
    const r = await call('POST', '/api/apis/oauth/oa', { client_id: 'made-c' });
    expect(r.status).toBe(503);
    expect(String((r.body as Record<string, unknown>).message)).toContain(`${ns}/${FACADE_CLIENT_SECRETS}`);
    expect(String((r.body as Record<string, unknown>).message)).toContain('does not exist');
    expect(await getJson(ns, 'oauthclient', clientResourceName(ns, 'oa', 'made-c'))).toBeUndefined();
    expect(await getJson(ns, 'secret', FACADE_CLIENT_SECRETS)).toBeUndefined(); // the facade did not create it
    const re = await kubectl(['apply', '-n', ns, '-f', '-'], chartSecret);
    expect(re.code).toBe(0);
    expect((await call('POST', '/api/apis/oauth/oa', { client_id: 'made-c' })).status).toBe(200);
  });
});
