/**
 * What a full resync and a change cost, counted (not timed) on a real controller, API server and Redis:
 *   - a resync of a settled namespace reconciles nothing: no AccessKey validated, no config compiled, nothing
 *     written; every key is compared with its session in the store (gw_controller_unchanged_total), the
 *     namespace's config found as left (controller/key-memo.ts, controller/config-settled.ts);
 *   - drift is still repaired by the next resync: a session deleted or changed in Redis, a status edited by hand;
 *   - an ApiDefinition edit that keeps the namespace's api_ids validates no AccessKey; a new API validates only
 *     the key that named it; a new key without policies runs no config reconcile; a labelled Secret's change
 *     reconciles its key.
 */
import { jest } from '@jest/globals';
import { sha256hex } from '../../../lib/hash.js';
import { loadKubeConnection } from '../../../lib/kube/connection.js';
import { createKubeApi, resourcePath, type KubeApi } from '../../../lib/kube/api.js';
import { REFS } from '../../../controller/context.js';
import { kubeconfig } from '../../helpers/kube.js';
import {
  accessKey,
  apiDef,
  apply,
  countSessions,
  createAccessKeys,
  eventually,
  policy,
  secret,
  startControllerStack,
  waitReady,
  type ControllerStack,
} from './helpers.js';

const KEYS = 150;
const APIS = 30;
/** Seconds between full resyncs: several run within the test. */
const RESYNC_S = 1.5;
jest.setTimeout(90_000);

const hashOf = (i: number): string => sha256hex(`resync-cost-${i}`);

describe('resync and change costs (counters)', () => {
  let st: ControllerStack;
  let api: KubeApi;

  /** The counters this suite follows, summed over labels as given. */
  const counters = async () => {
    const m = (name: string, labels: Record<string, string> = {}) => st.ctl.metric(name, labels);
    return {
      resyncs: await m('gw_controller_resyncs_total', { cause: 'periodic' }),
      keyReconciles: await m('gw_controller_reconciles_total', { kind: 'AccessKey' }),
      configReconciles: await m('gw_controller_reconciles_total', { kind: 'Config' }),
      keysValidated: await m('gw_controller_validated_total', { kind: 'AccessKey' }),
      apisParsed: await m('gw_controller_config_parsed_total', { kind: 'ApiDefinition' }),
      writes: await m('gw_controller_writes_total'),
      keysUnchanged: await m('gw_controller_unchanged_total', { kind: 'AccessKey' }),
      configsUnchanged: await m('gw_controller_unchanged_total', { kind: 'Config' }),
    };
  };
  type Counters = Awaited<ReturnType<typeof counters>>;
  const delta = (a: Counters, b: Counters): Counters =>
    Object.fromEntries(Object.keys(a).map((k) => [k, b[k as keyof Counters] - a[k as keyof Counters]])) as Counters;

  /** Waits for `n` more periodic resyncs and a drained queue; the counters then. */
  const afterResyncs = async (n: number): Promise<Counters> => {
    const start = (await counters()).resyncs;
    await eventually(async () => (await counters()).resyncs >= start + n, 30_000, `${n} resyncs`);
    await eventually(async () => (await st.ctl.metric('gw_controller_queue_depth')) === 0, 30_000, 'queue drained');
    return counters();
  };

  beforeAll(async () => {
    st = await startControllerStack('resync-cost', ['--resync-period', String(RESYNC_S)]);
    api = createKubeApi(await loadKubeConnection(kubeconfig()));
    await apply(
      st.ns,
      ...Array.from({ length: APIS }, (_, i) =>
        apiDef(`api-${i}`, { api_id: `api-${i}`, proxy: { listen_path: `/api-${i}/` } }),
      ),
      policy('gold', { rate: 100, per: 1 }),
      secret('k-secret-material', { key: 'the-raw-key-of-k-secret' }),
      accessKey('k-secret', { secretRef: { name: 'k-secret-material', key: 'key' }, apply_policies: ['gold'] }),
      accessKey('k-waits', { key_hash: sha256hex('resync-cost-waits'), access_rights: { 'api-new': {} } }),
    );
    await createAccessKeys(st.ns, KEYS, hashOf, { rate: 10, per: 1, access_rights: { 'api-1': {} } });
    await eventually(async () => (await countSessions(st.redis)) >= KEYS + 2, 60_000, 'every session stored');
    await waitReady(st.ns, 'accesskey', 'k-waits', 'False', 'ApiNotFound', 30_000);
    await waitReady(st.ns, 'accesskey', `k-${KEYS - 1}`, 'True', 'Reconciled', 30_000);
    await waitReady(st.ns, 'policy', 'gold', 'True', 'Reconciled', 30_000);
    await afterResyncs(2); // the statuses of the first pass written, every memo recorded
  });
  afterAll(async () => {
    await st?.stop();
  });

  test('a resync of a settled namespace validates, compiles and writes nothing; every key is compared', async () => {
    const before = await counters();
    const d = delta(before, await afterResyncs(3));
    expect(d.keyReconciles).toBe(0);
    expect(d.keysValidated).toBe(0);
    expect(d.configReconciles).toBe(0);
    expect(d.apisParsed).toBe(0);
    expect(d.writes).toBe(0);
    // every key compared with the store once per resync (the resyncs counted may have started a little apart)
    expect(d.keysUnchanged).toBeGreaterThanOrEqual((KEYS + 2) * (d.resyncs - 1));
    expect(d.keysUnchanged).toBeLessThanOrEqual((KEYS + 2) * (d.resyncs + 1));
    expect(d.configsUnchanged).toBeGreaterThanOrEqual(d.resyncs - 1);
  });

  test('drift is repaired by the next resync: a session deleted or altered in Redis, a status edited by hand', async () => {
    const before = await counters();
    await st.redis.del(`gw:session:${hashOf(3)}`);
    const altered = { namespace: st.ns, name: 'k-4', session: { rate: 99_999, per: 1, access_rights: {} } };
    await st.redis.set(`gw:session:${hashOf(4)}`, JSON.stringify(altered));
    const path = resourcePath(REFS.AccessKey, st.ns, 'k-5', 'status');
    await api.patch(path, [{ op: 'replace', path: '/status/conditions/0/message', value: 'edited by hand' }], 'json');
    await eventually(async () => (await st.redis.exists(`gw:session:${hashOf(3)}`)) === 1, 20_000, 'session back');
    await eventually(
      async () =>
        (JSON.parse((await st.redis.get(`gw:session:${hashOf(4)}`)) ?? '{}') as { session?: { rate?: number } }).session
          ?.rate === 10,
      20_000,
      'session repaired',
    );
    await eventually(
      async () => {
        const o = (await api.get(resourcePath(REFS.AccessKey, st.ns, 'k-5'))) as {
          status?: { conditions?: { message?: string }[] };
        };
        return o.status?.conditions?.[0]?.message === 'session stored';
      },
      20_000,
      'status repaired',
    );
    const d = delta(before, await afterResyncs(1));
    expect(d.keysValidated).toBeGreaterThanOrEqual(3);
    expect(d.keysValidated).toBeLessThanOrEqual(6); // the three, not the namespace
  });

  test('an API edit keeping the api_ids validates no key; a new API validates only the key naming it', async () => {
    const before = await counters();
    const cur = (await api.get(resourcePath(REFS.ApiDefinition, st.ns, 'api-2'))) as { metadata: object };
    await api.put(resourcePath(REFS.ApiDefinition, st.ns, 'api-2'), {
      ...apiDef('api-2', { api_id: 'api-2', proxy: { listen_path: '/api-2-moved/' } }),
      metadata: cur.metadata,
    });
    await eventually(
      async () =>
        (await st.ctl.metric('gw_controller_config_parsed_total', { kind: 'ApiDefinition' })) > before.apisParsed,
      20_000,
      'the edit compiled',
    );
    await eventually(async () => (await st.ctl.metric('gw_controller_queue_depth')) === 0, 20_000, 'queue drained');
    const edited = delta(before, await counters());
    expect(edited.apisParsed).toBe(1);
    expect(edited.keysValidated).toBe(0);

    await apply(st.ns, apiDef('api-new', { api_id: 'api-new', proxy: { listen_path: '/api-new/' } }));
    await waitReady(st.ns, 'accesskey', 'k-waits', 'True', 'Reconciled', 20_000);
    await eventually(async () => (await st.ctl.metric('gw_controller_queue_depth')) === 0, 20_000, 'queue drained');
    const added = delta(before, await counters());
    expect(added.keysValidated).toBe(1); // k-waits, not the KEYS keys of api-1
  });

  test('a new key without policies runs no config reconcile; a changed Secret reconciles its key', async () => {
    const before = await counters();
    await apply(st.ns, accessKey('k-late', { key_hash: sha256hex('resync-cost-late'), rate: 1, per: 1 }));
    await eventually(
      async () => (await st.redis.exists(`gw:session:${sha256hex('resync-cost-late')}`)) === 1,
      20_000,
      'late key stored',
    );
    await new Promise((r) => setTimeout(r, 1500)); // a config reconcile would be queued 1 s after the key
    await eventually(async () => (await st.ctl.metric('gw_controller_queue_depth')) === 0, 20_000, 'queue drained');
    const d = delta(before, await counters());
    expect(d.configReconciles).toBe(0);
    expect(d.keysValidated).toBe(1);

    await apply(st.ns, secret('k-secret-material', { key: 'another-raw-key' }));
    await eventually(
      async () => (await st.redis.exists(`gw:session:${sha256hex('another-raw-key')}`)) === 1,
      20_000,
      'the new key material stored',
    );
    // The new session is written before the old one is deleted (a rotated key never has a gap).
    await eventually(
      async () => (await st.redis.exists(`gw:session:${sha256hex('the-raw-key-of-k-secret')}`)) === 0,
      20_000,
      'the old key material removed',
    );
  });
});
