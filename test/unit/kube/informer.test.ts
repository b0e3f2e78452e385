import { pino } from 'pino';
import { Informer, type ChangeType } from '../../../lib/kube/informer.js';
import { KubeApiError, type KubeApi, type Query } from '../../../lib/kube/api.js';

const obj = (name: string, rv: string) => ({ metadata: { name, namespace: 'ns', resourceVersion: rv, managedFields: [{ manager: 'x' }] }, spec: { v: rv } });

/** A scripted API server: list answers in order; each watch plays its events, then ends or fails. */
class FakeApi implements KubeApi {
  lists: { items: unknown[]; rv: string; cont?: string }[] = [];
  watches: { events: unknown[]; fail?: Error; hang?: boolean }[] = [];
  listCalls: Query[] = [];
  watchCalls: Query[] = [];
  async get(_path: string, query?: Query): Promise<unknown> {
    this.listCalls.push(query ?? {});
    const l = this.lists.shift();
    if (!l) throw new KubeApiError('down', 503);
    return { metadata: { resourceVersion: l.rv, continue: l.cont }, items: l.items };
  }
  async watch(_path: string, query: Query, onEvent: (e: unknown) => void, signal: AbortSignal): Promise<void> {
    this.watchCalls.push(query);
    const w = this.watches.shift() ?? { events: [], hang: true };
    for (const e of w.events) {
      if (signal.aborted) return;
      onEvent(e);
    }
    if (w.fail) throw w.fail;
    if (w.hang) await new Promise<void>((r) => signal.addEventListener('abort', () => r()));
  }
  post = async (): Promise<unknown> => undefined;
  put = async (): Promise<unknown> => undefined;
  patch = async (): Promise<unknown> => undefined;
  delete = async (): Promise<unknown> => undefined;
  server = (): string => 'https://fake';
}

async function until(fn: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('timeout');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function start(api: FakeApi) {
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
    const api = new FakeApi();
    api.lists = [
      { items: [obj('a', '1'), obj('b', '2')], rv: '10', cont: 'next' },
      { items: [obj('c', '3')], rv: '10' },
    ];
    api.watches = [{ events: [{ type: 'ADDED', object: obj('d', '11') }, { type: 'BOOKMARK', object: { metadata: { name: '', resourceVersion: '15' } } }] }];
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
    const api = new FakeApi();
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
    const api = new FakeApi();
    api.lists = [
      { items: [obj('a', '1')], rv: '5' },
      { items: [obj('a', '7')], rv: '8' },
    ];
    api.watches = [
      { events: [{ type: 'MODIFIED', object: obj('a', '6') }, { type: 'DELETED', object: obj('a', '7') }], fail: new Error('connection reset') },
    ];
    const { inf, changes } = start(api);
    await until(() => api.listCalls.length >= 2 && api.watchCalls.length >= 2);
    inf.stop();
    expect(changes).toEqual(['add:a@1', 'update:a@6', 'delete:a@7', 'add:a@7']);
    expect(inf.size()).toBe(1);
  });
});
