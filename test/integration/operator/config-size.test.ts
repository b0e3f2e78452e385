/**
 * The ConfigMap size limit: a compiled config past one ConfigMap is sharded (index in gw-config, shards
 * gw-config-<n>, each listed with its SHA-256); a resource alone over a shard is the only one refused
 * (Ready=False ConfigTooLarge, gw_controller_config_refused); shrinking goes back inline and deletes the shards.
 */
import { jest } from '@jest/globals';
import { stringify } from 'yaml';
import { freshNamespace, kubeconfig, kubectl } from '../../helpers/kube.js';
import { createKubeApi, resourcePath } from '../../../lib/kube/api.js';
import { loadKubeConnection } from '../../../lib/kube/connection.js';
import { REFS } from '../../../controller/context.js';
import { sha256hex } from '../../../lib/hash.js';
import {
  apiDef,
  apply,
  eventually,
  getJson,
  policy,
  ready,
  startController,
  waitReady,
  type Controller,
} from './helpers.js';

jest.setTimeout(60_000);

describe('gw controller: ConfigMap size limit', () => {
  let ns: string;
  let ctl: Controller;

  beforeAll(async () => {
    ns = await freshNamespace('size');
    ctl = await startController(ns);
  });
  afterAll(async () => {
    await ctl?.stop();
  });

  const configMap = async (name: string): Promise<Record<string, string> | undefined> =>
    ((await getJson(ns, 'configmap', name)) as { data?: Record<string, string> } | undefined)?.data;

  test('past one ConfigMap → shards, all Ready; a Policy alone over a shard → only it ConfigTooLarge; back under → inline again', async () => {
    await apply(ns, apiDef('small', { api_id: 'small', proxy: { listen_path: '/small/' } }));
    await waitReady(ns, 'apidefinition', 'small', 'True', 'Reconciled');
    await eventually(async () => (await configMap('gw-config'))?.['config.json'], 10_000, 'config written');

    // create (not apply): kubectl apply would also store the object in an annotation, limited to 256 KiB
    const create = async (name: string, bytes: number): Promise<void> => {
      const r = await kubectl(
        ['create', '-n', ns, '-f', '-'],
        stringify(policy(name, { rate: 1, per: 1, meta_data: { blob: 'x'.repeat(bytes) } })),
      );
      expect(r.stderr).toBe('');
    };
    await create('big-1', 600_000); // still fits inline
    await eventually(
      async () => (await configMap('gw-config'))?.['config.json']?.includes(`${ns}/big-1`),
      10_000,
      'inline config with big-1',
    );
    await create('big-2', 600_000); // two of them do not: sharded
    const index = await eventually(
      async () => (await configMap('gw-config'))?.['shards.json'],
      10_000,
      'the index in gw-config',
    );
    const shards = (JSON.parse(index) as { shards: { name: string; sha256: string }[] }).shards;
    expect(shards.length).toBeGreaterThanOrEqual(2);
    const texts = await Promise.all(shards.map(async (s) => (await configMap(s.name))?.['config.json'] ?? ''));
    for (const [i, t] of texts.entries()) expect(sha256hex(t)).toBe(shards[i]!.sha256);
    expect(texts.filter((t) => t.includes(`${ns}/big-1`))).toHaveLength(1);
    expect(texts.filter((t) => t.includes(`${ns}/big-2`))).toHaveLength(1);
    expect(texts.filter((t) => t.includes('"/small/"'))).toHaveLength(1);
    for (const p of ['big-1', 'big-2']) await waitReady(ns, 'policy', p, 'True', 'Reconciled');

    await create('big-3', 1_100_000); // alone over a shard: refused alone
    // read through the API client: kubectl's output of a 1.1 MB object is over the helper's buffer
    const api = createKubeApi(await loadKubeConnection(kubeconfig()));
    const st = await eventually(
      async () => {
        const p = (await api.get(resourcePath(REFS.Policy, ns, 'big-3'))) as {
          status?: { conditions?: { status: string; reason: string; message: string }[] };
        };
        const c = p.status?.conditions?.[0];
        return c?.status === 'False' && c.reason === 'ConfigTooLarge' ? c : undefined;
      },
      10_000,
      'big-3 Ready=False ConfigTooLarge',
    );
    expect(st.message).toMatch(/over the ConfigMap shard budget/);
    expect((await ready(ns, 'apidefinition', 'small'))?.status).toBe('True');
    expect((await ready(ns, 'policy', 'big-1'))?.status).toBe('True');
    await eventually(async () => (await ctl.metric('gw_controller_config_refused', { namespace: ns })) === 1, 5_000);

    await kubectl(['delete', '-n', ns, 'policy', 'big-3', 'big-2']);
    await eventually(
      async () => (await configMap('gw-config'))?.['config.json']?.includes(`${ns}/big-1`),
      10_000,
      'inline again',
    );
    await eventually(async () => (await configMap(shards[0]!.name)) === undefined, 10_000, 'shards deleted');
    await eventually(async () => (await ctl.metric('gw_controller_config_refused', { namespace: ns })) === 0, 5_000);
  });
});
