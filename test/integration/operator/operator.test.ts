/**
 * `gw controller` against the real kube-apiserver and Redis: each kind reconciled into ConfigMap /
 * Redis with true status, updates, deletions through finalizers, broken references and their repair,
 * drift repair (flushed Redis, hand-edited ConfigMap), Events.
 */
import { jest } from '@jest/globals';
import { Redis } from 'ioredis';
import { sha256hex } from '../../../lib/hash.js';
import { SESSION_PREFIX } from '../../../contract/sessions.js';
import { storeKeys } from '../../../contract/store-keys.js';
import { SMOOTHING_CHANNEL } from '../../../lib/events.js';
import { request } from 'undici';
import { readClientRecord, clientRecordKey, verifyClientSecret } from '../../../controller/reconcile-client.js';
import { freshNamespace, kubectl } from '../../helpers/kube.js';
import { freshRedis } from '../../helpers/redis.js';
import {
  accessKey,
  apiDef,
  apply,
  eventsOn,
  eventually,
  getJson,
  oauthClient,
  policy,
  ready,
  secret,
  startController,
  waitReady,
  type Controller,
} from './helpers.js';

jest.setTimeout(60_000);

const H1 = sha256hex('operator-key-1');

describe('gw controller: reconciling the four kinds', () => {
  let ns: string;
  let redis: Redis;
  let ctl: Controller;

  beforeAll(async () => {
    ns = await freshNamespace('op');
    redis = await freshRedis();
    ctl = await startController(ns, ['--resync-period', '3', '--store-check-period', '1']);
  });
  afterAll(async () => {
    await ctl?.stop();
    redis?.disconnect();
  });

  const session = async (
    hash: string,
  ): Promise<{ namespace: string; name?: string; session: Record<string, unknown> } | undefined> => {
    const raw = await redis.get(SESSION_PREFIX + hash);
    return raw === null ? undefined : JSON.parse(raw);
  };
  const configMap = async (): Promise<
    | {
        config: { hash: string; apis: { api_id: string }[]; policies: Record<string, { spec: { rate?: number } }> };
        cm: Record<string, unknown>;
      }
    | undefined
  > => {
    const cm = (await getJson(ns, 'configmap', 'gw-config')) as { data?: Record<string, string> } | undefined;
    const text = cm?.data?.['config.json'];
    return text ? { config: JSON.parse(text), cm: cm as Record<string, unknown> } : undefined;
  };

  test('ApiDefinition + Policy → compiled config in ConfigMap gw-config, owner references, hash annotation, Ready', async () => {
    await apply(
      ns,
      apiDef('petstore', { api_id: 'pets', proxy: { listen_path: '/pets/' }, global_rate_limit: { rate: 10, per: 1 } }),
      policy('gold', { rate: 100, per: 60, access_rights: { pets: {} } }),
    );
    const api = await waitReady(ns, 'apidefinition', 'petstore', 'True', 'Reconciled');
    expect(api.observedGeneration).toBe(1);
    const pol = await waitReady(ns, 'policy', 'gold', 'True', 'Reconciled');
    expect(pol.statusBody?.apis).toEqual(['pets']);
    const { config, cm } = (await configMap())!;
    expect(config.apis.map((a) => a.api_id)).toEqual(['pets']);
    expect(config.policies[`${ns}/gold`]?.spec.rate).toBe(100);
    const meta = cm.metadata as {
      annotations: Record<string, string>;
      ownerReferences: { kind: string; name: string }[];
    };
    expect(meta.annotations['gw.io/config-hash']).toBe(config.hash);
    expect(meta.ownerReferences.map((o) => `${o.kind}/${o.name}`).sort()).toEqual([
      'ApiDefinition/petstore',
      'Policy/gold',
    ]);
  });

  test('kubectl get apidefinitions shows listen path, rate and per for the classic and the OAS form alike (compiled, in status)', async () => {
    const oas = {
      openapi: '3.0.3',
      info: { title: 'Catalog', version: '1.0.0' },
      paths: { '/items/{id}': { get: { operationId: 'getItem' } } },
      'x-gw-api-gateway': {
        info: { id: 'catalog', name: 'Catalog', state: { active: true } },
        server: { listenPath: { value: '/catalog/', strip: true }, authentication: { enabled: true } },
        upstream: { url: 'http://127.0.0.1:1', rateLimit: { enabled: true, rate: 50, per: '10s' } },
      },
    };
    await apply(ns, apiDef('catalog', { oas }));
    const st = await waitReady(ns, 'apidefinition', 'catalog', 'True', 'Reconciled');
    expect(st.statusBody).toMatchObject({ listenPath: '/catalog/', rate: 50, per: 10 });
    const rows = (await kubectl(['get', 'apidefinitions', '-n', ns])).stdout;
    expect(rows).toMatch(/NAME\s+LISTEN\s+RATE\s+PER\s+READY/);
    expect(rows).toMatch(/\ncatalog\s+\/catalog\/\s+50\s+10\s+True\s/);
    expect(rows).toMatch(/\npetstore\s+\/pets\/\s+10\s+1\s+True\s/);
  });

  test('a Policy update reaches the ConfigMap; a resync writes nothing', async () => {
    await apply(ns, policy('gold', { rate: 200, per: 60, access_rights: { pets: {} } }));
    await eventually(
      async () => (await configMap())?.config.policies[`${ns}/gold`]?.spec.rate === 200,
      10_000,
      'policy rate 200 in ConfigMap',
    );
    const r = await waitReady(ns, 'policy', 'gold', 'True', 'Reconciled');
    expect(r.observedGeneration).toBe(2);
    await new Promise((res) => setTimeout(res, 1500)); // let the write settle
    const cmWrites = await ctl.metric('gw_controller_writes_total', { target: 'configmap' });
    const statusWrites = await ctl.metric('gw_controller_writes_total', { target: 'status' });
    const resyncs = await ctl.metric('gw_controller_resyncs_total', { cause: 'periodic' });
    await eventually(
      async () => (await ctl.metric('gw_controller_resyncs_total', { cause: 'periodic' })) >= resyncs + 2,
      10_000,
      'two resyncs',
    );
    expect(await ctl.metric('gw_controller_writes_total', { target: 'configmap' })).toBe(cmWrites);
    expect(await ctl.metric('gw_controller_writes_total', { target: 'status' })).toBe(statusWrites);
  });

  test('AccessKey (key_hash) → session in Redis, finalizer, Ready with observedGeneration; update propagates', async () => {
    await apply(ns, accessKey('k1', { key_hash: H1, rate: 5, per: 10, apply_policies: ['gold'] }));
    const r = await waitReady(ns, 'accesskey', 'k1', 'True', 'Reconciled');
    expect(r.observedGeneration).toBe(1);
    expect(r.statusBody?.keyHash).toBe(H1);
    const s = await session(H1);
    expect(s).toEqual({ namespace: ns, name: 'k1', session: { rate: 5, per: 10, apply_policies: ['gold'] } });
    const obj = (await getJson(ns, 'accesskey', 'k1')) as { metadata: { finalizers?: string[] } };
    expect(obj.metadata.finalizers).toContain('gw.io/session-cleanup');
    // the Policy's status lists the key
    await eventually(
      async () => ((await ready(ns, 'policy', 'gold'))?.statusBody?.keys as string[] | undefined)?.includes('k1'),
      10_000,
      'policy lists k1',
    );

    await apply(ns, accessKey('k1', { key_hash: H1, rate: 7, per: 10, apply_policies: ['gold'] }));
    await eventually(async () => (await session(H1))?.session.rate === 7, 10_000, 'rate 7 in Redis');
    expect((await waitReady(ns, 'accesskey', 'k1', 'True', 'Reconciled')).observedGeneration).toBe(2);
  });

  test('a new key resets its quota counters; gw.io/suppress-reset: "true" keeps them', async () => {
    const h2 = sha256hex('operator-key-2');
    const h3 = sha256hex('operator-key-3');
    await redis.hset(storeKeys.quota(`q:h:${h2}`), 'used', '5', 'renews', '0');
    await redis.hset(storeKeys.quota(`q:h:${h3}`), 'used', '5', 'renews', '0');
    await apply(
      ns,
      accessKey('k2', { key_hash: h2, quota_max: 10, quota_renewal_rate: 3600 }),
      accessKey('k3', { key_hash: h3, quota_max: 10, quota_renewal_rate: 3600 }, { 'gw.io/suppress-reset': 'true' }),
    );
    await waitReady(ns, 'accesskey', 'k2', 'True', 'Reconciled');
    await waitReady(ns, 'accesskey', 'k3', 'True', 'Reconciled');
    expect(await redis.exists(storeKeys.quota(`q:h:${h2}`))).toBe(0);
    expect(await redis.hget(storeKeys.quota(`q:h:${h3}`), 'used')).toBe('5');
  });

  test('delete → session and counters leave Redis, then the finalizer goes and the object with it', async () => {
    await redis.zadd(storeKeys.log(`k:h:${H1}`), 1, 'x');
    await redis.hset(storeKeys.quota(`q:h:${H1}`), 'used', '1');
    const r = await kubectl(['delete', '-n', ns, 'accesskey', 'k1', '--wait=false']);
    expect(r.code).toBe(0);
    await eventually(async () => (await getJson(ns, 'accesskey', 'k1')) === undefined, 10_000, 'k1 gone');
    expect(await session(H1)).toBeUndefined();
    expect(await redis.exists(storeKeys.log(`k:h:${H1}`), storeKeys.quota(`q:h:${H1}`))).toBe(0);
  });

  test('secretRef: the key is read from the Secret; a missing Secret is generated with a random key', async () => {
    await apply(
      ns,
      secret('key-a', { key: 'raw-key-from-secret' }),
      accessKey('ka', { secretRef: { name: 'key-a', key: 'key' }, rate: 1, per: 1 }),
    );
    await waitReady(ns, 'accesskey', 'ka', 'True', 'Reconciled');
    expect((await session(sha256hex('raw-key-from-secret')))?.name).toBe('ka');

    await apply(ns, accessKey('kb', { secretRef: { name: 'key-b', key: 'token' }, rate: 1, per: 1 }));
    const st = await waitReady(ns, 'accesskey', 'kb', 'True', 'Reconciled');
    const sec = (await getJson(ns, 'secret', 'key-b')) as {
      data: Record<string, string>;
      metadata: { ownerReferences?: { kind: string; name: string }[] };
    };
    const value = Buffer.from(sec.data.token!, 'base64').toString('utf8');
    expect(Buffer.from(value, 'base64url').length * 8).toBeGreaterThanOrEqual(128);
    expect(sec.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'AccessKey', name: 'kb' });
    expect(st.statusBody?.keyHash).toBe(sha256hex(value));
    expect((await session(sha256hex(value)))?.name).toBe('kb');
    // the raw key is nowhere in the CR or the controller's log
    expect(JSON.stringify(await getJson(ns, 'accesskey', 'kb'))).not.toContain(value);
    expect(ctl.output()).not.toContain(value);
    expect(ctl.output()).not.toContain('raw-key-from-secret');
  });

  test('OAuthClient → client record in Redis with the secret hashed; delete removes it', async () => {
    await apply(
      ns,
      secret('client-1', { secret: 'client-secret-1' }),
      oauthClient('c1', {
        api_id: 'pets',
        client_id: 'cid-1',
        policy_id: 'gold',
        redirect_uri: 'https://x/cb',
        secretRef: { name: 'client-1', key: 'secret' },
      }),
    );
    await waitReady(ns, 'oauthclient', 'c1', 'True', 'Reconciled');
    const key = clientRecordKey(ns, 'pets', 'cid-1');
    const raw = await redis.get(key);
    expect(raw).not.toContain('client-secret-1');
    const rec = (await readClientRecord(redis, key))!;
    expect(rec).toMatchObject({
      api_id: 'pets',
      client_id: 'cid-1',
      policy_id: 'gold',
      redirect_uri: 'https://x/cb',
      name: 'c1',
    });
    expect(verifyClientSecret(rec, 'client-secret-1')).toBe(true);
    expect(verifyClientSecret(rec, 'client-secret-2')).toBe(false);
    expect(
      ((await getJson(ns, 'oauthclient', 'c1')) as { metadata: { finalizers: string[] } }).metadata.finalizers,
    ).toContain('gw.io/client-cleanup');

    await kubectl(['delete', '-n', ns, 'oauthclient', 'c1', '--wait=false']);
    await eventually(async () => (await getJson(ns, 'oauthclient', 'c1')) === undefined, 10_000, 'c1 gone');
    expect(await redis.exists(key)).toBe(0);
  });

  test('missing references → Ready=False with the reason (and a Warning Event); fixing them recovers without restart', async () => {
    await apply(
      ns,
      accessKey('kp', { key_hash: sha256hex('kp'), apply_policies: ['silver'] }),
      accessKey('ka2', { key_hash: sha256hex('ka2'), access_rights: { ghost: {} } }),
      oauthClient('c2', { api_id: 'pets', client_id: 'cid-2', secretRef: { name: 'client-2', key: 'secret' } }),
      policy('bronze', { rate: 1, per: 1, access_rights: { ghost: {} } }),
      accessKey('kboth', { key_hash: sha256hex('kboth'), apply_policies: ['silver'], access_rights: { ghost: {} } }),
      oauthClient('c3', { api_id: 'ghost', client_id: 'cid-3', secretRef: { name: 'client-3', key: 'secret' } }),
    );
    expect((await waitReady(ns, 'accesskey', 'kp', 'False', 'PolicyNotFound')).message).toContain('silver');
    // several missing references: all named, the reason is the first one's
    const both = (await waitReady(ns, 'accesskey', 'kboth', 'False', 'PolicyNotFound')).message;
    expect(both).toContain('policy not found in namespace ' + ns + ': silver');
    expect(both).toContain('API(s) not found in namespace ' + ns + ': ghost');
    const c3 = (await waitReady(ns, 'oauthclient', 'c3', 'False', 'ApiNotFound')).message;
    expect(c3).toContain('API ghost not found');
    expect(c3).toContain('Secret ' + ns + '/client-3');
    expect((await waitReady(ns, 'accesskey', 'ka2', 'False', 'ApiNotFound')).message).toContain('ghost');
    expect((await waitReady(ns, 'oauthclient', 'c2', 'False', 'SecretNotFound')).message).toContain('client-2');
    expect((await waitReady(ns, 'policy', 'bronze', 'False', 'ApiNotFound')).message).toContain('ghost');
    const events = await eventually(
      async () => {
        const items = await eventsOn(ns, 'kp');
        return items.some((e) => e.reason === 'PolicyNotFound' && e.type === 'Warning') ? items : undefined;
      },
      10_000,
      'Warning Event PolicyNotFound',
    );
    expect(events.length).toBeGreaterThan(0);

    await apply(
      ns,
      policy('silver', { rate: 2, per: 1 }),
      apiDef('ghost-api', { api_id: 'ghost', proxy: { listen_path: '/ghost/' } }),
      secret('client-2', { secret: 's2' }),
    );
    await waitReady(ns, 'accesskey', 'kp', 'True', 'Reconciled');
    await waitReady(ns, 'accesskey', 'ka2', 'True', 'Reconciled');
    await waitReady(ns, 'oauthclient', 'c2', 'True', 'Reconciled');
    await waitReady(ns, 'policy', 'bronze', 'True', 'Reconciled');
  });

  test('conflicting ApiDefinitions: the later one is Ready=False InvalidSpec', async () => {
    await apply(ns, apiDef('petstore-2', { api_id: 'pets2', proxy: { listen_path: '/pets/' } }));
    expect((await waitReady(ns, 'apidefinition', 'petstore-2', 'False', 'InvalidSpec')).message).toContain('conflicts');
    await waitReady(ns, 'apidefinition', 'petstore', 'True', 'Reconciled');
  });

  test('drift: a flushed Redis gets its sessions and client records back; a hand-edited ConfigMap is restored', async () => {
    const hp = sha256hex('kp');
    expect(await session(hp)).toBeDefined();
    const clientKey = clientRecordKey(ns, 'pets', 'cid-2');
    expect(await redis.exists(clientKey)).toBe(1);
    await redis.flushdb();
    const t0 = Date.now();
    await eventually(
      async () => (await session(hp)) !== undefined && (await redis.exists(clientKey)) === 1,
      8_000,
      'sessions restored',
    );
    const restoredIn = Date.now() - t0;
    expect(restoredIn).toBeLessThan(8_000);

    // one session deleted behind the controller's back (marker intact): the periodic resync (3 s here) restores it
    await redis.del(SESSION_PREFIX + hp);
    const t1 = Date.now();
    await eventually(async () => (await session(hp)) !== undefined, 8_000, 'session restored by the resync');
    expect(Date.now() - t1).toBeLessThan(3_000 + 2_000);

    const before = (await configMap())!;
    const edited = { ...before.config, policies: {} };
    const r = await kubectl([
      'patch',
      '-n',
      ns,
      'configmap',
      'gw-config',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ data: { 'config.json': JSON.stringify(edited) } }),
    ]);
    expect(r.code).toBe(0);
    await eventually(
      async () => JSON.stringify((await configMap())?.config) === JSON.stringify(before.config),
      8_000,
      'ConfigMap restored',
    );
  });

  test('a smoothing event published by a sidecar becomes a Normal Event on the AccessKey', async () => {
    const hk = sha256hex('smooth-key');
    await apply(ns, accessKey('ks', { key_hash: hk, rate: 10, per: 1 }));
    await waitReady(ns, 'accesskey', 'ks', 'True', 'Reconciled');
    const payload = {
      event: 'RateLimitSmoothingUp',
      api_id: 'pets',
      limiter_key: `k:h:${hk}`,
      old_allowance: 5,
      new_allowance: 7,
      time: new Date().toISOString(),
      namespace: ns,
    };
    await redis.publish(SMOOTHING_CHANNEL, JSON.stringify(payload));
    const ev = await eventually(
      async () => (await eventsOn(ns, 'ks')).find((e) => e.reason === 'RateLimitSmoothingUp'),
      10_000,
      'smoothing Event',
    );
    expect(ev.type).toBe('Normal');
    expect(ev.message).toContain('5 → 7');
    expect(await ctl.metric('gw_controller_smoothing_events_total', { event: 'RateLimitSmoothingUp' })).toBe(1);
  });

  test('a smoothing event naming the policy that configured the limit goes on that Policy, not the first one with a pattern', async () => {
    // an unrelated policy with a rate_limit_pattern, created first: an event must not go to the first policy with a pattern
    await apply(ns, policy('aaa-unrelated', { rate: 1000, per: 1, meta_data: { rate_limit_pattern: '$gw_meta.org' } }));
    await apply(
      ns,
      policy('ppat', {
        rate: 8,
        per: 6,
        smoothing: { enabled: true, threshold: 2, step: 2, trigger: 0.5, delay: 1 },
        meta_data: { rate_limit_pattern: '$gw_meta.team' },
      }),
    );
    await waitReady(ns, 'policy', 'ppat', 'True', 'Reconciled');
    const smoothingDownOn = async (name: string) =>
      (await eventsOn(ns, name)).filter((e) => e.reason === 'RateLimitSmoothingDown');
    const payload = {
      event: 'RateLimitSmoothingDown',
      api_id: 'pets',
      limiter_key: 'k:p:green',
      old_allowance: 6,
      new_allowance: 4,
      time: new Date().toISOString(),
      namespace: ns,
      policy: 'ppat',
    };
    await redis.publish(SMOOTHING_CHANNEL, JSON.stringify(payload));
    const [ev] = await eventually(
      async () => {
        const got = await smoothingDownOn('ppat');
        return got.length ? got : undefined;
      },
      10_000,
      'smoothing Event on ppat',
    );
    expect(ev!.involvedObject.kind).toBe('Policy');
    expect(ev!.message).toContain('6 → 4');
    expect(await smoothingDownOn('aaa-unrelated')).toEqual([]);
  });

  test('metrics and health: reconciles by kind and result, latency, queue depth, leader', async () => {
    expect(
      await ctl.metric('gw_controller_reconciles_total', { kind: 'AccessKey', result: 'success' }),
    ).toBeGreaterThan(0);
    expect(await ctl.metric('gw_controller_reconciles_total', { kind: 'Config', result: 'success' })).toBeGreaterThan(
      0,
    );
    expect(await ctl.metric('gw_controller_reconcile_duration_seconds_count', { kind: 'OAuthClient' })).toBeGreaterThan(
      0,
    );
    expect(await ctl.metric('gw_controller_leader')).toBe(1); // no --leader-elect: always leads
    const text = await (await request(`${ctl.metricsUrl}/metrics`)).body.text();
    expect(text).toMatch(/^gw_controller_queue_depth \d+$/m);
    const h = await request(`${ctl.metricsUrl}/healthz`);
    expect(h.statusCode).toBe(200);
    await h.body.dump();
  });

  test('two AccessKeys with one key: the second is refused; deleting it leaves the session of the first', async () => {
    const hd = sha256hex('dup-key');
    await apply(ns, accessKey('dup-a', { key_hash: hd, rate: 3, per: 1 }));
    await waitReady(ns, 'accesskey', 'dup-a', 'True', 'Reconciled');
    await apply(ns, accessKey('dup-b', { key_hash: hd, rate: 9, per: 1 }));
    expect((await waitReady(ns, 'accesskey', 'dup-b', 'False', 'InvalidSpec')).message).toContain('dup-a');
    expect((await session(hd))?.name).toBe('dup-a');
    await kubectl(['delete', '-n', ns, 'accesskey', 'dup-b', '--wait=false']);
    await eventually(async () => (await getJson(ns, 'accesskey', 'dup-b')) === undefined, 10_000, 'dup-b gone');
    expect((await session(hd))?.session.rate).toBe(3);
  });

  test('an AccessKey edited into a spec only the controller can refuse (a bad regex) fails closed; fixing it brings it back', async () => {
    const h = sha256hex('edit-key');
    await apply(ns, accessKey('edited', { key_hash: h, rate: 100, per: 60 }));
    await waitReady(ns, 'accesskey', 'edited', 'True', 'Reconciled');
    expect((await session(h))?.session.rate).toBe(100);
    // the API server accepts the regex; the edit also meant to deactivate the key
    await apply(
      ns,
      accessKey('edited', {
        key_hash: h,
        rate: 100,
        per: 60,
        is_inactive: true,
        access_rights: { a: { allowed_urls: [{ url: '/only(', methods: ['GET'] }] } },
      }),
    );
    expect((await waitReady(ns, 'accesskey', 'edited', 'False', 'InvalidSpec')).message).toContain(
      'allowed_urls.0.url',
    );
    await eventually(async () => (await session(h)) === undefined, 10_000, 'the old session withdrawn');
    await apply(ns, accessKey('edited', { key_hash: h, rate: 7, per: 60 }));
    await waitReady(ns, 'accesskey', 'edited', 'True', 'Reconciled');
    expect((await session(h))?.session.rate).toBe(7);
  });

  test('a key applying a policy that exists but does not validate says so (not "not found")', async () => {
    await apply(
      ns,
      policy('broken', {
        rate: 5,
        per: 1,
        access_rights: { pets: { allowed_urls: [{ url: '(', methods: ['GET'] }] } },
      }),
    );
    await apply(ns, accessKey('kbroken', { key_hash: sha256hex('kbroken'), apply_policies: ['broken'] }));
    const m = (await waitReady(ns, 'accesskey', 'kbroken', 'False', 'PolicyNotFound')).message;
    expect(m).toBe(`policy not valid in namespace ${ns} (see its Ready condition): broken`);
    expect((await waitReady(ns, 'policy', 'broken', 'False', 'InvalidSpec')).message).toContain('allowed_urls.0.url');
  });

  test('a key taken out of its Secret is revoked (session removed, SecretNotFound); the same key put back restores it', async () => {
    const h = sha256hex('revocable-key');
    await apply(
      ns,
      secret('rev', { key: 'revocable-key' }),
      accessKey('krev', { secretRef: { name: 'rev', key: 'key' }, rate: 100, per: 60 }),
    );
    await waitReady(ns, 'accesskey', 'krev', 'True', 'Reconciled');
    expect((await session(h))?.name).toBe('krev');
    // the data key renamed: the Secret exists but no longer holds the key
    const r = await kubectl(
      ['replace', '-n', ns, '-f', '-'],
      JSON.stringify({ ...secret('rev', { renamed: 'revocable-key' }) }),
    );
    expect(r.code).toBe(0);
    expect((await waitReady(ns, 'accesskey', 'krev', 'False', 'SecretNotFound')).message).toContain('has no key');
    await eventually(async () => (await session(h)) === undefined, 10_000, 'the session withdrawn');
    await kubectl(['replace', '-n', ns, '-f', '-'], JSON.stringify({ ...secret('rev', { key: 'revocable-key' }) }));
    await waitReady(ns, 'accesskey', 'krev', 'True', 'Reconciled');
    expect((await session(h))?.name).toBe('krev');
  });

  test('a key applying an inactive policy is Ready=False PolicyInactive (the gateway refuses it); active again → Ready', async () => {
    await apply(ns, policy('sleepy', { rate: 5, per: 1, active: false }));
    await apply(ns, accessKey('ksleepy', { key_hash: sha256hex('ksleepy'), apply_policies: ['sleepy'] }));
    const m = (await waitReady(ns, 'accesskey', 'ksleepy', 'False', 'PolicyInactive')).message;
    expect(m).toBe(`policy inactive in namespace ${ns} (active: false; the key is refused): sleepy`);
    await apply(ns, policy('sleepy', { rate: 5, per: 1, active: true }));
    await waitReady(ns, 'accesskey', 'ksleepy', 'True', 'Reconciled');
  });

  test('after a restart the owner of a key is remembered (status.keyHash): a new duplicate is still refused', async () => {
    await ctl.stop('SIGTERM');
    ctl = await startController(ns, ['--resync-period', '3', '--store-check-period', '1']);
    await apply(ns, accessKey('dup-c', { key_hash: sha256hex('dup-key'), rate: 5, per: 1 }));
    expect((await waitReady(ns, 'accesskey', 'dup-c', 'False', 'InvalidSpec')).message).toContain('dup-a');
    expect((await session(sha256hex('dup-key')))?.name).toBe('dup-a');
  });

  test('SIGTERM: the controller drains and exits 0', async () => {
    await ctl.stop('SIGTERM');
    expect(ctl.proc.signalCode).toBeNull();
    expect(ctl.proc.exitCode).toBe(0);
    expect(ctl.output()).toContain('shutting down');
  });
});
