/**
 * The management facade in a cluster, end to end (docs/facade.md): real
 * kube-apiserver + Redis, and `gw controller`, `gw sidecar`, `gw facade` spawned from dist as real
 * processes. Everything goes over real HTTP to the facade (and through the `gw keys|oauth|proxy` CLI);
 * the effect is checked at the sidecar, in the custom resources and in Redis.
 */
import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { Server } from 'node:http';
import type { Redis } from 'ioredis';
import { request } from 'undici';
import {
  clientResourceName,
  clientSecretName,
  FACADE_CLIENT_SECRETS,
  keyResourceName,
} from '../../../facade/backend.js';
import { clientRecordKey } from '../../../controller/reconcile-client.js';
import { sha256hex } from '../../../lib/hash.js';
import { SESSION_PREFIX } from '../../../contract/sessions.js';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { CLI } from '../../helpers/standalone.js';
import { startClusterStack, type ClusterStack, type ServerProcess as Proc } from '../../helpers/server-process.js';
import { freshNamespace, kubeconfig, kubectl } from '../../helpers/kube.js';
import { freshRedis } from '../../helpers/redis.js';
import {
  accessKey,
  apiDef,
  apply,
  eventually,
  getJson,
  policy,
  ready,
  secret,
  startController,
  waitReady,
  type Controller,
} from '../operator/helpers.js';

jest.setTimeout(90_000);

const SECRET = 'cluster-facade-secret-0123456789';
const TOKEN = 'cluster-facade-token-0123456789';
/** Short, so the "controller down" test does not wait 10 s per write. */
const READY_TIMEOUT_S = 2;

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `gw` client binary with credentials from the environment (as a pipeline would). */
function gwCli(facadeUrl: string, args: string[]): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const env = {
      ...process.env,
      GW_FACADE_URL: facadeUrl,
      GW_SECRET: SECRET,
      GW_ACCESS_TOKEN: TOKEN,
      GW_CLIENT_TIMEOUT: '30',
    };
    const p = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const t = setTimeout(() => p.kill('SIGKILL'), 45_000);
    p.once('error', reject);
    p.once('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
}

const asRecord = (v: unknown): Record<string, unknown> => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`not an object: ${JSON.stringify(v)}`);
  return v as Record<string, unknown>;
};

describe('gw facade in a cluster (kube-apiserver + Redis + controller + sidecar)', () => {
  let ns: string;
  let redis: Redis;
  let ctl: Controller;
  let echo: { server: Server; url: string };
  let stack: ClusterStack;
  let sidecar: Proc;
  let facade: Proc;
  const latencies: number[] = [];

  async function call(method: string, path: string, body?: unknown): Promise<Reply> {
    const headers: Record<string, string> = {};
    if (path.startsWith('/api/')) headers.authorization = `Bearer ${TOKEN}`;
    if (path.startsWith('/gw/')) headers['x-gw-authorization'] = SECRET;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await request(`${facade.url}${path}`, {
      method: method as 'GET',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await r.body.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON: kept as text */
    }
    return { status: r.statusCode, headers: r.headers, body: parsed };
  }

  /** POST /gw/keys/{key}, timed; the latency is the facade's write → controller Ready wait. */
  async function postKey(key: string, session: Record<string, unknown>, query = ''): Promise<Reply> {
    const t0 = Date.now();
    const r = await call('POST', `/gw/keys/${encodeURIComponent(key)}${query}`, session);
    if (r.status === 200) latencies.push(Date.now() - t0);
    return r;
  }

  async function atSidecar(
    key: string | undefined,
    path = '/orders/1',
  ): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
    const r = await request(`${sidecar.url}${path}`, { headers: key === undefined ? {} : { authorization: key } });
    return { status: r.statusCode, body: await r.body.text(), headers: r.headers };
  }

  async function keyResource(hash: string): Promise<Record<string, unknown> | undefined> {
    return getJson(ns, 'accesskey', keyResourceName(hash));
  }

  beforeAll(async () => {
    ns = await freshNamespace('facade-cl');
    redis = await freshRedis();
    echo = await startEcho();
    await apply(
      ns,
      apiDef('orders', {
        name: 'Orders',
        api_id: 'orders',
        proxy: { listen_path: '/orders/', target_url: 'http://unused.invalid' },
      }),
      policy('tight', { rate: 3, per: 10 }),
    );
    stack = await startClusterStack({
      ns,
      upstream: echo.url,
      controllerArgs: ['--resync-period', '5'],
      reconciled: async () => {
        await eventually(
          async () => (await ready(ns, 'apidefinition', 'orders'))?.status === 'True',
          15_000,
          'ApiDefinition Ready',
        );
        await eventually(async () => (await ready(ns, 'policy', 'tight'))?.status === 'True', 15_000, 'Policy Ready');
      },
      // the sidecar has loaded the compiled config when the API answers (401: no key) instead of 404
      serves: '/orders/1',
      facadeConfig: (gatewayUrls) => ({
        secret: SECRET,
        access_tokens: [TOKEN],
        gateway_urls: gatewayUrls,
        facade_rate_limit: { rate: 1000, per: 1 },
      }),
      facadeArgs: ['--ready-timeout', String(READY_TIMEOUT_S)],
    });
    ({ ctl, facade } = stack);
    sidecar = stack.sidecars[0]!;
  });

  afterAll(async () => {
    await stack?.stop();
    echo?.server.close();
    redis?.disconnect();
    if (latencies.length) {
      const s = [...latencies].sort((a, b) => a - b);
      console.log(
        `[facade-cluster] key write → Ready → 200: n=${s.length} min=${s[0]} ms median=${s[Math.floor(s.length / 2)]} ms max=${s[s.length - 1]} ms`,
      );
    }
  });

  test('POST /gw/keys: 200 added once Ready; usable at the sidecar at once; 429 at the limit; only the hash is stored', async () => {
    const raw = 'cluster-key-one-0123456789abcdef';
    const hash = sha256hex(raw);
    const r = await postKey(raw, {
      rate: 3,
      per: 10,
      access_rights: { orders: { api_id: 'orders', api_name: 'Orders', versions: ['Default'] } },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ key: raw, key_hash: hash, action: 'added', status: 'ok' });

    // Immediately: no retry loop. The first request is admitted, the 4th of 3 per 10 s is refused.
    const first = await atSidecar(raw);
    expect(first.status).toBe(200);
    const codes = [first.status];
    let last = first;
    for (let i = 0; i < 3; i++) {
      last = await atSidecar(raw);
      codes.push(last.status);
    }
    expect(codes).toEqual([200, 200, 200, 429]);
    expect(JSON.parse(last.body)).toEqual({ error: 'Rate Limit Exceeded' });

    // The AccessKey was Ready (this generation observed) when the facade answered.
    const cr = await keyResource(hash);
    expect(cr).toBeDefined();
    const view = await ready(ns, 'accesskey', keyResourceName(hash));
    expect(view?.status).toBe('True');
    expect(view?.observedGeneration).toBeGreaterThanOrEqual(view?.generation ?? Infinity);
    expect(asRecord(asRecord(cr).spec).key_hash).toBe(hash);
    expect(asRecord(asRecord(cr).metadata).labels).toEqual({ 'app.kubernetes.io/managed-by': 'gw-facade' });

    // The raw key is nowhere in the namespace's resources: CRs, ConfigMaps, Secrets.
    for (const kind of ['accesskeys', 'configmaps', 'secrets', 'apidefinitions', 'policies']) {
      const all = await kubectl(['get', '-n', ns, kind, '-o', 'json']);
      expect(all.code).toBe(0);
      expect(all.stdout).not.toContain(raw);
      expect(all.stdout).not.toContain(Buffer.from(raw).toString('base64'));
    }
    const cm = await getJson(ns, 'configmap', 'gw-config');
    expect(cm).toBeDefined();
    expect(JSON.stringify(cm)).not.toContain(raw);
    // Redis holds the session under the hash.
    expect(await redis.exists(SESSION_PREFIX + hash)).toBe(1);
    expect(await redis.exists(SESSION_PREFIX + raw)).toBe(0);
    expect(await redis.keys(`*${raw}*`)).toEqual([]);
    expect(await redis.get(SESSION_PREFIX + hash)).not.toContain(raw);
  });

  test('POST again → modified; GET shows the live quota; suppress_reset=1 keeps it, without it the quota is reset', async () => {
    const raw = 'cluster-key-quota-0123456789abcdef';
    const hash = sha256hex(raw);
    const session = { rate: 100, per: 60, quota_max: 10, quota_renewal_rate: 3600 };
    const added = await postKey(raw, session);
    expect(added.status).toBe(200);
    expect(asRecord(added.body).action).toBe('added');

    for (let i = 0; i < 3; i++) expect((await atSidecar(raw)).status).toBe(200);
    const before = Math.floor(Date.now() / 1000);
    const got = await call('GET', `/gw/keys/${raw}`);
    expect(got.status).toBe(200);
    const g = asRecord(got.body);
    expect(g.quota_max).toBe(10);
    expect(g.quota_remaining).toBe(7);
    expect(typeof g.quota_renews).toBe('number');
    expect(g.quota_renews as number).toBeGreaterThan(before);
    expect(g.quota_renews as number).toBeLessThanOrEqual(before + 3600 + 1);
    expect(g).not.toHaveProperty('key_hash');

    // Same keyID again, suppress_reset=1: modified, live quota kept (and still enforced at the sidecar).
    const kept = await postKey(raw, { ...session, rate: 50 }, '?suppress_reset=1');
    expect(kept.status).toBe(200);
    expect(kept.body).toEqual({ key: raw, key_hash: hash, action: 'modified', status: 'ok' });
    expect(asRecord((await call('GET', `/gw/keys/${raw}`)).body).quota_remaining).toBe(7);
    expect(asRecord(asRecord(asRecord(await keyResource(hash)).metadata).annotations)['gw.io/suppress-reset']).toBe(
      'true',
    );
    expect((await atSidecar(raw)).status).toBe(200);
    expect(asRecord((await call('GET', `/gw/keys/${raw}`)).body).quota_remaining).toBe(6);

    // Without suppress_reset: modified, and the quota starts over (docs/contract.md#quotas: adding a key resets it).
    const reset = await postKey(raw, session);
    expect(reset.status).toBe(200);
    expect(asRecord(reset.body).action).toBe('modified');
    const after = asRecord((await call('GET', `/gw/keys/${raw}`)).body);
    expect(after.quota_remaining).toBe(10);
    expect(after.rate).toBe(100);
    // The same through the pipeline CLI.
    expect((await atSidecar(raw)).status).toBe(200);
    const cli = await gwCli(facade.url, ['keys', 'get', raw]);
    expect(cli).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(cli.stdout)).toMatchObject({ quota_max: 10, quota_remaining: 9, rate: 100, per: 60 });

    // The reset request was acted on once: a periodic full resync of the controller does not reset again.
    const resets = await ctl.metric('gw_controller_writes_total', { target: 'quota_reset' });
    const resyncs = await ctl.metric('gw_controller_resyncs_total', { cause: 'periodic' });
    await eventually(
      async () => (await ctl.metric('gw_controller_resyncs_total', { cause: 'periodic' })) > resyncs,
      12_000,
      'a periodic resync',
    );
    // every key of the namespace (two by now) checked again after that resync: reconciled, or found as its
    // last reconcile left it (an unchanged key costs a comparison with the store)
    const checked = async (): Promise<number> =>
      (await ctl.metric('gw_controller_reconciles_total', { kind: 'AccessKey' })) +
      (await ctl.metric('gw_controller_unchanged_total', { kind: 'AccessKey' }));
    const reconciled = await checked();
    await eventually(
      async () => (await ctl.metric('gw_controller_resyncs_total', { cause: 'periodic' })) > resyncs + 1,
      12_000,
      'a second periodic resync',
    );
    await eventually(async () => (await checked()) >= reconciled + 2, 5_000, 'keys checked by the resync');
    expect(await ctl.metric('gw_controller_writes_total', { target: 'quota_reset' })).toBe(resets);
    expect(asRecord((await call('GET', `/gw/keys/${raw}`)).body).quota_remaining).toBe(9);
  });

  test('hashed=true imports a key by its hash (the raw key stays unknown to the cluster) and it works at the sidecar at once', async () => {
    const raw = 'cluster-key-hashed-0123456789abcdef';
    const hash = sha256hex(raw);
    const r = await postKey(hash, { rate: 2, per: 10 }, '?hashed=true');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ key: hash, key_hash: hash, action: 'added', status: 'ok' });
    expect([(await atSidecar(raw)).status, (await atSidecar(raw)).status, (await atSidecar(raw)).status]).toEqual([
      200, 200, 429,
    ]);
    expect((await atSidecar(hash)).status).toBe(403); // the hash is not a key
    expect(JSON.stringify(await keyResource(hash))).not.toContain(raw);
    expect(asRecord((await call('GET', `/gw/keys/${hash}?hashed=true`)).body)).toMatchObject({ rate: 2, per: 10 });
  });

  test('a key applied with kubectl (secretRef) is the same key to the facade: listed, read, modified in place (no second AccessKey)', async () => {
    const raw = 'kubectl-key-0123456789abcdef';
    const hash = sha256hex(raw);
    await apply(
      ns,
      secret('kubectl-key', { key: raw }),
      accessKey('kubectl-key', { secretRef: { name: 'kubectl-key', key: 'key' }, rate: 5, per: 10 }),
    );
    await waitReady(ns, 'accesskey', 'kubectl-key', 'True', 'Reconciled', 15_000);
    expect(asRecord((await call('GET', '/gw/keys')).body).keys).toContain(hash);
    expect(asRecord((await call('GET', `/gw/keys/${raw}`)).body)).toMatchObject({ rate: 5, per: 10 });
    expect(asRecord((await call('GET', `/gw/keys/${hash}?hashed=true`)).body)).toMatchObject({ rate: 5, per: 10 });
    const w = await postKey(raw, { rate: 1, per: 10 });
    expect(w.status).toBe(200);
    expect(w.body).toEqual({ key: raw, key_hash: hash, action: 'modified', status: 'ok' });
    const k = await getJson(ns, 'accesskey', 'kubectl-key');
    expect(asRecord(k?.spec)).toMatchObject({ secretRef: { name: 'kubectl-key', key: 'key' }, rate: 1, per: 10 });
    expect(asRecord(k?.spec).key_hash).toBeUndefined();
    expect(await keyResource(hash)).toBeUndefined(); // no facade-made twin
    expect([(await atSidecar(raw)).status, (await atSidecar(raw)).status]).toEqual([200, 429]);
  });

  test('a key naming an API that does not exist → 400 at once, nothing written', async () => {
    const t0 = Date.now();
    const r = await postKey('ghost-key-0123456789abcdef', { access_rights: { ghost: { api_id: 'ghost' } } });
    expect(r.status).toBe(400);
    expect(asRecord(r.body).message).toMatch(/access_rights\.ghost: API "ghost" not found/);
    expect(Date.now() - t0).toBeLessThan(READY_TIMEOUT_S * 1000);
    expect(await keyResource(sha256hex('ghost-key-0123456789abcdef'))).toBeUndefined();
  });

  test('a key created with the CLI (apply_policies) is enforced by the policy; DELETE → refused at the sidecar within 1 s, session gone', async () => {
    const created = await gwCli(facade.url, [
      'keys',
      'create',
      '--body',
      JSON.stringify({ apply_policies: ['tight'] }),
    ]);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const out = asRecord(JSON.parse(created.stdout));
    expect(out).toMatchObject({ action: 'added', status: 'ok' });
    const raw = out.key as string;
    const hash = sha256hex(raw);
    expect(out.key_hash).toBe(hash);
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) codes.push((await atSidecar(raw)).status);
    expect(codes).toEqual([200, 200, 200, 429]); // the policy's 3 per 10 s

    const list = await call('GET', '/gw/keys');
    expect(list.status).toBe(200);
    expect(asRecord(list.body).keys).toEqual(expect.arrayContaining([hash]));

    const del = await call('DELETE', `/gw/keys/${raw}`);
    expect(del.status).toBe(200);
    expect(asRecord(del.body)).toMatchObject({ key_hash: hash, action: 'deleted', status: 'ok' });
    // The facade answered once the controller's finalizer ran: gone everywhere at once, no polling.
    expect((await atSidecar(raw)).status).toBe(403);
    expect(await redis.exists(SESSION_PREFIX + hash)).toBe(0);
    expect(await keyResource(hash)).toBeUndefined();
    expect((await call('GET', `/gw/keys/${raw}`)).status).toBe(404);
    expect((await call('DELETE', `/gw/keys/${raw}`)).status).toBe(404);
    expect(asRecord((await call('GET', '/gw/keys')).body).keys).not.toContain(hash);
  });

  test('DELETE then POST of the same key at once (rotation in a pipeline) → added, and the key works', async () => {
    const raw = 'cluster-key-rotate-0123456789abcdef';
    const hash = sha256hex(raw);
    for (let round = 0; round < 3; round++) {
      const created = await postKey(raw, { rate: 50, per: 60 });
      expect(created.status).toBe(200);
      expect(asRecord(created.body).action).toBe('added');
      expect((await atSidecar(raw)).status).toBe(200);
      expect((await call('DELETE', `/gw/keys/${raw}`)).status).toBe(200);
      // the answer to DELETE means gone: the sidecar refuses the key, no session is left
      expect((await atSidecar(raw)).status).toBe(403);
      expect(await redis.exists(SESSION_PREFIX + hash)).toBe(0);
    }
    const last = await postKey(raw, { rate: 50, per: 60 });
    expect(asRecord(last.body).action).toBe('added');
    expect((await atSidecar(raw)).status).toBe(200);
    expect((await call('GET', `/gw/keys/${raw}`)).status).toBe(200);
  });

  test('OAuth clients: create (CR + Secret + hashed Redis record), list without secrets, get, delete removes all three', async () => {
    const r = await call('POST', '/api/apis/oauth/orders', {
      redirect_uri: 'https://app.example/cb',
      policy_id: 'tight',
      meta_data: { team: 'a' },
    });
    expect(r.status).toBe(200);
    const c = asRecord(r.body);
    const clientId = c.client_id as string;
    const secret = c.secret as string;
    expect(clientId).toMatch(/^[0-9a-f]{32}$/);
    expect(secret.length).toBeGreaterThanOrEqual(22);
    expect(c).toMatchObject({ redirect_uri: 'https://app.example/cb', policy_id: 'tight', meta_data: { team: 'a' } });

    const name = clientResourceName(ns, 'orders', clientId);
    const cr = await getJson(ns, 'oauthclient', name);
    expect(cr).toBeDefined();
    expect(JSON.stringify(cr)).not.toContain(secret);
    expect((await ready(ns, 'oauthclient', name))?.status).toBe('True');
    // the secret is a key of the facade's one Secret (named up front: its Role reaches no other Secret)
    expect(asRecord(asRecord(cr).spec).secretRef).toEqual({ name: FACADE_CLIENT_SECRETS, key: name });
    const sec = asRecord(await getJson(ns, 'secret', FACADE_CLIENT_SECRETS));
    expect(Buffer.from(asRecord(sec.data)[name] as string, 'base64').toString('utf8')).toBe(secret);
    expect(await getJson(ns, 'secret', clientSecretName(name))).toBeUndefined();
    const recordKey = clientRecordKey(ns, 'orders', clientId);
    const record = await redis.get(recordKey);
    expect(record).not.toBeNull();
    expect(record).not.toContain(secret);
    expect(asRecord(JSON.parse(record!))).toMatchObject({
      client_id: clientId,
      api_id: 'orders',
      policy_id: 'tight',
      secret_hash: sha256hex(secret),
    });

    // Another one through the CLI, kept for the restart test.
    const cli = await gwCli(facade.url, [
      'oauth',
      'create',
      'orders',
      '--body',
      JSON.stringify({ client_id: 'kept-client', redirect_uri: 'https://kept.example/cb' }),
    ]);
    expect(cli).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(cli.stdout)).toMatchObject({ client_id: 'kept-client', redirect_uri: 'https://kept.example/cb' });

    const list = await call('GET', '/api/apis/oauth/orders');
    expect(list.status).toBe(200);
    const items = list.body as Record<string, unknown>[];
    expect(items.map((x) => x.client_id).sort()).toEqual([clientId, 'kept-client'].sort());
    for (const x of items) expect(x).not.toHaveProperty('secret');
    const one = await call('GET', `/api/apis/oauth/orders/${clientId}`);
    expect(one.status).toBe(200);
    expect(asRecord(one.body)).toMatchObject({ client_id: clientId, secret, redirect_uri: 'https://app.example/cb' });

    const del = await call('DELETE', `/api/apis/oauth/orders/${clientId}`);
    expect(del.status).toBe(200);
    expect(await getJson(ns, 'oauthclient', name)).toBeUndefined();
    // its key removed from the shared Secret; the other client's stays
    const after = asRecord(asRecord(await getJson(ns, 'secret', FACADE_CLIENT_SECRETS)).data);
    expect(after[name]).toBeUndefined();
    expect(after[clientResourceName(ns, 'orders', 'kept-client')]).toBeDefined();
    expect(await redis.exists(recordKey)).toBe(0);
    expect((await call('GET', `/api/apis/oauth/orders/${clientId}`)).status).toBe(404);
  });

  test('POST /api/proxy to the sidecar → {status_code, headers, body} with the sidecar’s X-RateLimit-* headers (HTTP and gw proxy)', async () => {
    const raw = 'cluster-key-proxy-0123456789abcdef';
    expect((await postKey(raw, { rate: 20, per: 60 })).status).toBe(200);
    const r = await call('POST', '/api/proxy', {
      method: 'GET',
      url: `${sidecar.url}/orders/items?x=1`,
      headers: { authorization: raw },
    });
    expect(r.status).toBe(200);
    const b = asRecord(r.body);
    expect(b.status_code).toBe(200);
    const h = asRecord(b.headers);
    expect(h['x-ratelimit-limit']).toBe('20');
    expect(h['x-ratelimit-remaining']).toBe('19');
    expect(Number(h['x-ratelimit-reset'])).toBeGreaterThan(0);
    expect(asRecord(b.body)).toMatchObject({ method: 'GET', path: '/items?x=1' });

    const cli = await gwCli(facade.url, [
      'proxy',
      'GET',
      `${sidecar.url}/orders/items`,
      '-H',
      `Authorization: ${raw}`,
      '--fail',
    ]);
    expect(cli).toMatchObject({ code: 0, stderr: '' });
    const p = asRecord(JSON.parse(cli.stdout));
    expect(p.status_code).toBe(200);
    expect(asRecord(p.headers)['x-ratelimit-remaining']).toBe('18');

    // No key → the sidecar's own 401 comes back as data, not as an error of the facade.
    const noKey = await call('POST', '/api/proxy', { method: 'GET', url: `${sidecar.url}/orders/items` });
    expect(noKey.status).toBe(200);
    expect(asRecord(noKey.body).status_code).toBe(401);
  });

  test('controller stopped → a key write answers 504 "exists but is not Ready"; the controller back → the key works', async () => {
    const doomed = 'cluster-key-doomed-0123456789abcdef';
    expect((await postKey(doomed, { rate: 5, per: 10 })).status).toBe(200);
    await ctl.stop();
    const raw = 'cluster-key-late-0123456789abcdef';
    const hash = sha256hex(raw);
    const t0 = Date.now();
    const r = await call('POST', `/gw/keys/${raw}`, { rate: 5, per: 10 });
    const took = Date.now() - t0;
    expect(r.status).toBe(504);
    const msg = asRecord(r.body);
    expect(msg.status).toBe('error');
    expect(msg.message).toEqual(
      expect.stringContaining(`AccessKey ${ns}/${keyResourceName(hash)} was written and exists, but is not Ready`),
    );
    expect(msg.message).toEqual(expect.stringContaining('repeating the request is safe'));
    expect(took).toBeGreaterThanOrEqual(READY_TIMEOUT_S * 1000 - 50);
    expect(took).toBeLessThan(READY_TIMEOUT_S * 1000 + 3000);
    expect(await keyResource(hash)).toBeDefined(); // the resource was written
    expect((await atSidecar(raw)).status).toBe(403); // but nothing reconciled it: no session yet
    // The CLI tells a pipeline the same with its own exit code, and still prints the key it generated
    // (and its hash): the AccessKey exists, so the key must not be lost.
    const cli = await gwCli(facade.url, ['keys', 'create', '--body', '{"rate": 5, "per": 10}']);
    expect(cli.code).toBe(9);
    expect(cli.stderr).toMatch(/^gw keys create: HTTP 504: .*exists, but is not Ready/);
    const printed = JSON.parse(cli.stdout) as { key: string; key_hash: string; status: string };
    expect(printed.status).toBe('not_ready');
    expect(printed.key_hash).toBe(sha256hex(printed.key));
    expect(await keyResource(printed.key_hash)).toBeDefined();

    // A DELETE cannot complete without the controller's finalizer either: 504, and the key is hidden.
    const del = await call('DELETE', `/gw/keys/${doomed}`);
    expect(del.status).toBe(504);
    expect(asRecord(del.body).message).toEqual(
      expect.stringContaining(
        `AccessKey ${ns}/${keyResourceName(sha256hex(doomed))} is being deleted, but still exists`,
      ),
    );
    expect((await call('GET', `/gw/keys/${doomed}`)).status).toBe(404);
    expect(asRecord((await call('GET', '/gw/keys')).body).keys).not.toContain(sha256hex(doomed));

    ctl = stack.ctl = await startController(ns, ['--resync-period', '5']);
    const back = Date.now();
    await eventually(
      async () => (await atSidecar(doomed)).status === 403,
      10_000,
      'deleted key refused once the controller is back',
    );
    await eventually(async () => (await keyResource(sha256hex(doomed))) === undefined, 5_000, 'AccessKey gone');
    expect(await redis.exists(SESSION_PREFIX + sha256hex(doomed))).toBe(0);
    expect((await call('DELETE', `/gw/keys/${doomed}`)).status).toBe(404);
    await eventually(
      async () => (await atSidecar(raw)).status === 200,
      10_000,
      'key usable once the controller is back',
    );
    console.log(`[facade-cluster] controller restart → pending key usable after ${Date.now() - back} ms`);
    expect((await ready(ns, 'accesskey', keyResourceName(hash)))?.status).toBe('True');
    // Repeating the write is safe: now it answers 200 at once.
    const again = await postKey(raw, { rate: 5, per: 10 });
    expect(again.status).toBe(200);
    expect(asRecord(again.body).action).toBe('modified');
    // The CLI's retry with the printed key writes the same AccessKey: no orphan per try.
    const keysBefore = (asRecord((await call('GET', '/gw/keys')).body).keys as string[]).length;
    const retry = await gwCli(facade.url, ['keys', 'create', printed.key, '--body', '{"rate": 5, "per": 10}']);
    expect(retry.code).toBe(0);
    expect(JSON.parse(retry.stdout)).toMatchObject({
      key: printed.key,
      key_hash: printed.key_hash,
      action: 'modified',
    });
    expect((asRecord((await call('GET', '/gw/keys')).body).keys as string[]).length).toBe(keysBefore);
    expect((await atSidecar(printed.key)).status).toBe(200);
  });

  test('restart the facade → everything created is still there (it lives in the custom resources)', async () => {
    const keysBefore = asRecord((await call('GET', '/gw/keys')).body).keys as string[];
    const clientsBefore = (await call('GET', '/api/apis/oauth/orders')).body;
    expect(keysBefore.length).toBeGreaterThanOrEqual(4);
    await facade.stop();
    facade = await stack.restartFacade();
    expect(asRecord((await call('GET', '/gw/keys')).body).keys).toEqual(keysBefore);
    expect((await call('GET', '/api/apis/oauth/orders')).body).toEqual(clientsBefore);
    const k = await call('GET', '/gw/keys/cluster-key-one-0123456789abcdef');
    expect(k.status).toBe(200);
    expect(asRecord(k.body)).toMatchObject({ rate: 3, per: 10 });
    const c = await call('GET', '/api/apis/oauth/orders/kept-client');
    expect(c.status).toBe(200);
    expect(typeof asRecord(c.body).secret).toBe('string');
    // Still usable at the sidecar, and still writable (modified, not added).
    expect((await atSidecar('cluster-key-proxy-0123456789abcdef')).status).toBe(200);
    const w = await postKey('cluster-key-proxy-0123456789abcdef', { rate: 20, per: 60 }, '?suppress_reset=1');
    expect(w.status).toBe(200);
    expect(asRecord(w.body).action).toBe('modified');
  });
});

describe('gw facade --ready-timeout', () => {
  test.each(['0', '-1', 'soon'])('%s → exit 1 with a one-line reason', async (value) => {
    const r = await new Promise<CliRun>((resolve, reject) => {
      const p = spawn(
        process.execPath,
        [CLI, 'facade', '--kubeconfig', kubeconfig(), '--listen', '127.0.0.1:0', '--ready-timeout', value],
        {
          env: { ...process.env, GW_SECRET: SECRET, GW_ACCESS_TOKENS: TOKEN },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const t = setTimeout(() => p.kill('SIGKILL'), 15_000);
      p.once('error', reject);
      p.once('close', (code) => {
        clearTimeout(t);
        resolve({ code, stdout, stderr });
      });
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`gw: --ready-timeout: expected a positive number of seconds, got ${JSON.stringify(value)}\n`);
  });
});
