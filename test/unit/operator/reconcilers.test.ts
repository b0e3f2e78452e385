/**
 * The reconcilers' declared watches (controller/reconcilers.ts) as dispatch.ts applies them: which informer
 * events queue which typed work items, at which priority, and what the caches' first list queues (nothing).
 * A real WorkQueue records what it is handed; the informers are lists of objects.
 */
import { Dispatcher } from '../../../controller/dispatch.js';
import { reconcilers } from '../../../controller/reconcilers.js';
import { SecretIndex } from '../../../controller/secret-index.js';
import { ApiIdIndex } from '../../../controller/api-index.js';
import { SettledConfigs } from '../../../controller/config-settled.js';
import { WorkQueue } from '../../../controller/work-queue.js';
import { itemKey, type WorkItem } from '../../../controller/work-items.js';
import type { OperatorContext } from '../../../controller/context.js';
import type { KubeObject } from '../../../lib/kube/informer.js';
import { FakeTimers } from './fake-timers.js';

const obj = (kind: string, name: string, spec: Record<string, unknown> = {}, generation = 1): KubeObject =>
  ({
    apiVersion: kind === 'Secret' || kind === 'ConfigMap' ? 'v1' : 'gw.io/v1alpha1',
    kind,
    metadata: { name, namespace: 'ns', generation, resourceVersion: String(generation) },
    spec,
  }) as KubeObject;
const api = (name: string, apiId: string, generation = 1) =>
  obj('ApiDefinition', name, { api_id: apiId, use_keyless: true, proxy: { listen_path: `/${name}/` } }, generation);

/** A dispatcher over fixed caches; `taken()` runs the queue and returns the queue keys in the order run. */
function setup(cache: { keys?: KubeObject[]; clients?: KubeObject[] } = {}) {
  const timers = new FakeTimers();
  const seen: string[] = [];
  const queue = new WorkQueue<WorkItem>({
    keyOf: itemKey,
    handler: async (item) => void seen.push(itemKey(item)),
    concurrency: 1,
    timers,
  });
  const list = (objs: KubeObject[] = []) => ({ list: () => objs });
  const settled = new SettledConfigs();
  const ctx = {
    informers: { keys: list(cache.keys), clients: list(cache.clients) },
    apiIds: new ApiIdIndex(),
    settled,
  } as unknown as OperatorContext;
  let synced = true;
  const d = new Dispatcher({ reconcilers, ctx, queue, secretIndex: new SecretIndex(), synced: () => synced });
  const taken = async (): Promise<string[]> => {
    queue.start();
    await queue.idle();
    queue.stop();
    return seen.splice(0);
  };
  return { d, timers, taken, settled, ctx, listing: (v: boolean) => (synced = !v) };
}

describe('reconcilers: declared watches', () => {
  test('an ApiDefinition: its config (live), then keys with access_rights when an api_id came, then clients (bulk)', async () => {
    const keyA = obj('AccessKey', 'with-rights', { access_rights: { orders: {} } });
    const keyB = obj('AccessKey', 'no-rights', {});
    const client = obj('OAuthClient', 'c1', {});
    const s = setup({ keys: [keyA, keyB], clients: [client] });
    s.d.onEvent('ApiDefinition', 'add', api('orders', 'orders'));
    expect(await s.taken()).toEqual(['Config|ns', 'AccessKey|ns|with-rights', 'OAuthClient|ns|c1']);
    // a new generation that keeps the namespace's api_ids: its config and clients, no key
    s.d.onEvent('ApiDefinition', 'update', api('orders', 'orders', 2), api('orders', 'orders'));
    expect(await s.taken()).toEqual(['Config|ns', 'OAuthClient|ns|c1']);
    // a status-only update (same generation) maps to nothing
    s.d.onEvent('ApiDefinition', 'update', api('orders', 'orders', 2), api('orders', 'orders', 2));
    expect(await s.taken()).toEqual([]);
  });

  test('a Policy: its config, the keys applying it and the clients', async () => {
    const applying = obj('AccessKey', 'gold-key', { apply_policies: ['gold'] });
    const other = obj('AccessKey', 'silver-key', { apply_policies: ['silver'] });
    const s = setup({ keys: [applying, other], clients: [obj('OAuthClient', 'c1')] });
    s.d.onEvent('Policy', 'update', obj('Policy', 'gold', {}, 2), obj('Policy', 'gold'));
    expect(await s.taken()).toEqual(['Config|ns', 'AccessKey|ns|gold-key', 'OAuthClient|ns|c1']);
  });

  test('an AccessKey: itself; when it applies a policy, its config a second later and a new key epoch', async () => {
    const s = setup();
    const key = obj('AccessKey', 'k', { apply_policies: ['gold'] });
    s.d.onEvent('AccessKey', 'add', key);
    expect(await s.taken()).toEqual(['AccessKey|ns|k']);
    expect(s.settled.keyEpoch('ns')).toBe(1);
    await s.timers.advance(999);
    expect(await s.taken()).toEqual([]);
    await s.timers.advance(1);
    expect(await s.taken()).toEqual(['Config|ns']);
    // a deletion: the config (the policy's key list), never the deleted key
    s.d.onEvent('AccessKey', 'delete', key);
    await s.timers.advance(1000);
    expect(await s.taken()).toEqual(['Config|ns']);
    // a key without policies: no config
    s.d.onEvent('AccessKey', 'add', obj('AccessKey', 'plain'));
    await s.timers.advance(1000);
    expect(await s.taken()).toEqual(['AccessKey|ns|plain']);
  });

  test('a Secret: the keys and clients whose secretRef names it', async () => {
    const s = setup();
    s.d.onEvent('AccessKey', 'add', obj('AccessKey', 'k', { secretRef: { name: 's1' } }));
    s.d.onEvent('OAuthClient', 'add', obj('OAuthClient', 'c', { secretRef: { name: 's1' } }));
    s.d.onEvent('AccessKey', 'add', obj('AccessKey', 'other', { secretRef: { name: 's2' } }));
    await s.taken();
    s.d.onEvent('Secret', 'update', obj('Secret', 's1', {}, 2), obj('Secret', 's1'));
    expect((await s.taken()).sort()).toEqual(['AccessKey|ns|k', 'OAuthClient|ns|c']);
  });

  test('a ConfigMap: its namespace config for gw-config and a shard, nothing for another name', async () => {
    const s = setup();
    s.d.onEvent('ConfigMap', 'update', obj('ConfigMap', 'gw-config'), obj('ConfigMap', 'gw-config'));
    expect(await s.taken()).toEqual(['Config|ns']);
    s.d.onEvent('ConfigMap', 'delete', obj('ConfigMap', 'gw-config-3'));
    expect(await s.taken()).toEqual(['Config|ns']);
    s.d.onEvent('ConfigMap', 'update', obj('ConfigMap', 'unrelated'), obj('ConfigMap', 'unrelated'));
    expect(await s.taken()).toEqual([]);
  });

  test("the caches' first list queues nothing, and the indexes still learn it", async () => {
    const s = setup({ keys: [obj('AccessKey', 'with-rights', { access_rights: { orders: {} } })] });
    s.listing(true);
    s.d.onEvent('ApiDefinition', 'add', api('orders', 'orders'));
    s.d.onEvent('AccessKey', 'add', obj('AccessKey', 'k', { secretRef: { name: 's1' }, apply_policies: ['gold'] }));
    expect(await s.taken()).toEqual([]);
    expect(s.ctx.apiIds.has('ns', 'orders')).toBe(true);
    expect(s.settled.keyEpoch('ns')).toBe(0);
    s.listing(false);
    s.d.onEvent('Secret', 'update', obj('Secret', 's1', {}, 2), obj('Secret', 's1'));
    expect(await s.taken()).toEqual(['AccessKey|ns|k']);
  });
});

describe('work queue of typed items', () => {
  test('items dedup by their key and the handler gets the item itself', async () => {
    const got: WorkItem[] = [];
    const q = new WorkQueue<WorkItem>({
      keyOf: itemKey,
      handler: async (i) => void got.push(i),
      timers: new FakeTimers(),
    });
    q.add({ kind: 'AccessKey', namespace: 'a|b', name: 'k' });
    q.add({ kind: 'AccessKey', namespace: 'a|b', name: 'k' });
    q.add({ kind: 'Config', namespace: 'a|b' });
    q.start();
    await q.idle();
    // a namespace is a DNS label, but the item never goes through its key: no split to get wrong
    expect(got).toEqual([
      { kind: 'AccessKey', namespace: 'a|b', name: 'k' },
      { kind: 'Config', namespace: 'a|b' },
    ]);
  });
});
