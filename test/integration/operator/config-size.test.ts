/**
 * The ConfigMap size limit: a namespace whose compiled config would exceed it gets no partial write;
 * its ApiDefinitions say Ready=False ConfigTooLarge, the previous config stays, and shrinking recovers.
 */
import { jest } from '@jest/globals';
import { stringify } from 'yaml';
import { freshNamespace, kubectl } from '../../helpers/kube.js';
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

  const configText = async (): Promise<string | undefined> =>
    ((await getJson(ns, 'configmap', 'gw-config')) as { data?: Record<string, string> } | undefined)?.data?.[
      'config.json'
    ];

  test('over 1 MB → ConfigTooLarge on the ApiDefinitions, previous config kept; back under → Ready again', async () => {
    await apply(ns, apiDef('small', { api_id: 'small', proxy: { listen_path: '/small/' } }));
    await waitReady(ns, 'apidefinition', 'small', 'True', 'Reconciled');
    await eventually(configText, 10_000, 'config written');

    const blob = 'x'.repeat(600_000);
    // create (not apply): kubectl apply would also store the object in an annotation, limited to 256 KiB
    const create = async (name: string): Promise<void> => {
      const r = await kubectl(
        ['create', '-n', ns, '-f', '-'],
        stringify(policy(name, { rate: 1, per: 1, meta_data: { blob } })),
      );
      expect(r.stderr).toBe('');
    };
    await create('big-1'); // ~600 KB: still fits
    const before = sha256hex(
      (await eventually(
        async () => {
          const t = await configText();
          return t?.includes(`${ns}/big-1`) ? t : undefined;
        },
        10_000,
        'config with big-1',
      ))!,
    );
    await create('big-2'); // ~1.2 MB: does not
    const st = await waitReady(ns, 'apidefinition', 'small', 'False', 'ConfigTooLarge');
    expect(st.message).toMatch(/over the ConfigMap limit/);
    expect(sha256hex((await configText())!)).toBe(before); // the previous config stays
    expect((await ready(ns, 'policy', 'big-2'))?.status).toBe('True'); // the Policy itself is fine

    await kubectl(['delete', '-n', ns, 'policy', 'big-2']);
    await waitReady(ns, 'apidefinition', 'small', 'True', 'Reconciled');
    const after = (await configText())!; // big-2 never made it in; the config with big-1 is the right one again
    expect(after.includes(`${ns}/big-1`)).toBe(true);
    expect(after.includes(`${ns}/big-2`)).toBe(false);
  });
});
