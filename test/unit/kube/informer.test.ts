import { pino } from 'pino';
import { Informer, type ChangeType } from '../../../lib/kube/informer.js';
import { FakeKubeApi, until } from '../../helpers/fake-kube-api.js';

const obj = (name: string, rv: string) => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv, managedFields: [{ manager: 'x' }] },
  spec: { v: rv },
});

function start(api: FakeKubeApi) {
  const changes: string[] = [];
  const inf = new Informer({
    api,
    resource: { group: 'gw.io', version: 'v1alpha1', plural: 'accesskeys', kind: 'AccessKey' },
    logger: pino({ level: 'silent' }),
    onChange: (t: ChangeType, o) => changes.push(`${t}:${o.metadata.name}@${o.metadata.resourceVersion}`),
    pageSize: 2,
  });
  inf.start();
  return { inf, changes };
}

describe('operator informer', () => {
  test('pages the list, resumes the watch from the last resourceVersion, drops managedFields', async () => {
    const api = new FakeKubeApi();
    api.lists = [
      { items: [obj('a', '1'), obj('b', '2')], rv: '10', cont: 'next' },
      { items: [obj('c', '3')], rv: '10' },
    ];
    api.watches = [
      {
        events: [
          { type: 'ADDED', object: obj('d', '11') },
          { type: 'BOOKMARK', object: { metadata: { name: '', resourceVersion: '15' } } },
        ],
      },
    ];
    const { inf, changes } = start(api);
    await until(() => api.watchCalls.length >= 2);
    inf.stop();
    expect(api.listCalls.map((q) => q.continue)).toEqual([undefined, 'next']);
    expect(changes).toEqual(['add:a@1', 'add:b@2', 'add:c@3', 'add:d@11']);
    expect(api.watchCalls.map((q) => q.resourceVersion)).toEqual(['10', '15']); // the second resumes after the bookmark
    expect((inf.get('ns', 'a')!.metadata as Record<string, unknown>).managedFields).toBeUndefined();
    expect(inf.hasSynced()).toBe(true);
  });

  test('410 Gone relists at once and delivers what changed meanwhile, deletions included', async () => {
    const api = new FakeKubeApi();
    api.lists = [
      { items: [obj('a', '1'), obj('b', '2')], rv: '10' },
      { items: [obj('a', '20')], rv: '21' },
    ];
    api.watches = [{ events: [{ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } }] }];
    const { inf, changes } = start(api);
    await until(() => api.watchCalls.length >= 2);
    inf.stop();
    expect(api.listCalls).toHaveLength(2);
    expect(changes).toEqual(['add:a@1', 'add:b@2', 'update:a@20', 'delete:b@2']);
    expect(api.watchCalls[1]!.resourceVersion).toBe('21');
    expect(inf.list('ns').map((o) => o.metadata.name)).toEqual(['a']);
  });

  test('a failing watch relists after a backoff; MODIFIED/DELETED events keep the cache', async () => {
    const api = new FakeKubeApi();
    api.lists = [
      { items: [obj('a', '1')], rv: '5' },
      { items: [obj('a', '7')], rv: '8' },
    ];
    api.watches = [
      {
        events: [
          { type: 'MODIFIED', object: obj('a', '6') },
          { type: 'DELETED', object: obj('a', '7') },
        ],
        fail: new Error('connection reset'),
      },
    ];
    const { inf, changes } = start(api);
    await until(() => api.listCalls.length >= 2 && api.watchCalls.length >= 2);
    inf.stop();
    expect(changes).toEqual(['add:a@1', 'update:a@6', 'delete:a@7', 'add:a@7']);
    expect(inf.size()).toBe(1);
  });

  test('stop() ends the pause before the next watch at once: no timer is left behind', async () => {
    const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const api = new FakeKubeApi();
    api.lists = [{ items: [], rv: '1' }];
    api.watches = [{ events: [] }]; // ended by the server at once: the informer waits 1 s before watching again
    const { inf } = start(api);
    await until(() => api.watchCalls.length >= 1);
    await new Promise((r) => setImmediate(r));
    const pausing = timers();
    inf.stop();
    await new Promise((r) => setImmediate(r));
    expect(timers()).toBe(pausing - 1);
    expect(api.watchCalls).toHaveLength(1);
  });
});
