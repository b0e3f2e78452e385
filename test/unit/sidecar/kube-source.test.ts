/**
 * The sidecar's ConfigMap source on a scripted API server (lib/kube's informer underneath): the
 * request it makes (gw-config only), a bad config refused and the previous one kept, an unreachable API
 * server at start, 410 → relist, a failed watch keeping the last good config.
 */
import { pino } from 'pino';
import { FakeKubeApi, until } from '../../helpers/fake-kube-api.js';
import { KubeConfigSource } from '../../../sidecar/config/kube-source.js';
import { compileConfig } from '../../../compiler/compile-config.js';
import { ApiDefinitionResource } from '../../../crds/kinds.js';

function configText(path: string): string {
  const def = ApiDefinitionResource.parse({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name: path.replace(/\//g, ''), namespace: 'ns' },
    spec: { use_keyless: true, proxy: { listen_path: path }, global_rate_limit: { rate: 10, per: 1 } },
  });
  return JSON.stringify(compileConfig([def], []).config);
}
const cm = (rv: string, text: string) => ({
  metadata: { name: 'gw-config', namespace: 'ns', resourceVersion: rv },
  data: { 'config.json': text },
});

function source(api: FakeKubeApi) {
  const logs: string[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void logs.push((JSON.parse(line) as { msg: string }).msg) },
  );
  let refused = 0;
  const applied: string[] = [];
  const s = new KubeConfigSource(
    api,
    'ns',
    logger,
    () => refused++,
    (c) => applied.push(c.apis.map((a) => a.listenPath).join(',')),
  );
  return { s, logs, applied, refused: () => refused };
}

describe('sidecar KubeConfigSource (light client)', () => {
  let s: KubeConfigSource | undefined;
  afterEach(() => s?.stop());

  test('lists then watches gw-config only; a bad config is refused (metric + log) and the previous one kept', async () => {
    const api = new FakeKubeApi();
    api.lists = [{ items: [cm('1', configText('/a/'))], rv: '1' }];
    api.watches = [
      {
        events: [
          { type: 'MODIFIED', object: cm('2', '{"not":"a config"}') },
          { type: 'MODIFIED', object: cm('3', configText('/b/')) },
        ],
      },
    ];
    const t = source(api);
    s = t.s;
    await t.s.start();
    expect(t.s.isLoaded()).toBe(true);
    await until(() => t.applied.length === 2);
    expect(t.applied).toEqual(['/a/', '/b/']);
    expect(t.refused()).toBe(1);
    expect(t.logs.some((l) => l.startsWith('config refused, keeping the previous one'))).toBe(true);
    expect(t.s.current().apis.map((a) => a.listenPath)).toEqual(['/b/']);
    for (const c of api.calls.slice(0, 2)) {
      expect(c.path).toBe('/api/v1/namespaces/ns/configmaps');
      expect(c.query.fieldSelector).toBe('metadata.name=gw-config');
    }
    expect(api.calls[1]).toMatchObject({ kind: 'watch', query: { resourceVersion: '1' } });
  });

  test('hand-written ConfigMaps: no config.json, a rate without a window, two APIs on one listen path are refused; a new content under the same hash is applied', async () => {
    const api = new FakeKubeApi();
    const good = JSON.parse(configText('/a/')) as {
      hash: string;
      apis: { apiLimit: { rate: number; per: number }; listenPath: string }[];
    };
    const noWindow = structuredClone(good);
    noWindow.apis[0]!.apiLimit = { rate: 5, per: 0 }; // it was applied: the API unlimited
    const twice = structuredClone(good);
    twice.apis.push({ ...structuredClone(good.apis[0]!), listenPath: '/a/' });
    const sameHash = JSON.parse(configText('/c/')) as { hash: string };
    sameHash.hash = good.hash; // it was ignored: the sidecar compared hashes
    api.lists = [{ items: [cm('1', JSON.stringify(good))], rv: '1' }];
    api.watches = [
      {
        events: [
          {
            type: 'MODIFIED',
            object: { metadata: { name: 'gw-config', namespace: 'ns', resourceVersion: '2' }, data: { other: 'x' } },
          }, // it was ignored silently
          { type: 'MODIFIED', object: cm('3', JSON.stringify(noWindow)) },
          { type: 'MODIFIED', object: cm('4', JSON.stringify(twice)) },
          { type: 'MODIFIED', object: cm('5', JSON.stringify(sameHash)) },
        ],
      },
    ];
    const t = source(api);
    s = t.s;
    await t.s.start();
    await until(() => t.applied.length === 2);
    expect(t.applied).toEqual(['/a/', '/c/']);
    expect(t.refused()).toBe(3);
    const refusals = t.logs.filter((l) => l.startsWith('config refused, keeping the previous one'));
    expect(refusals).toEqual([
      'config refused, keeping the previous one: neither data.config.json nor data.shards.json',
      'config refused, keeping the previous one: config.json: apis.0.apiLimit.per: per must be greater than 0 when rate is greater than 0 (rate and per both 0 disable the limit)',
      'config refused, keeping the previous one: config.json: apis.1.listenPath: /a/ is also the listen path of ns/a',
    ]);
  });

  test('API server unreachable at start: start() returns unloaded, the config arrives once it answers', async () => {
    const api = new FakeKubeApi();
    const t = source(api);
    s = t.s;
    const started = t.s.start();
    await started;
    expect(t.s.isLoaded()).toBe(false);
    expect(t.logs).toContain('cannot read config from the API server; keeping the last good config');
    api.lists = [{ items: [cm('5', configText('/a/'))], rv: '5' }];
    await until(() => t.s.isLoaded());
    expect(t.applied).toEqual(['/a/']);
  });

  test('a failed watch keeps the last good config and retries; 410 Gone relists', async () => {
    const api = new FakeKubeApi();
    api.lists = [{ items: [cm('1', configText('/a/'))], rv: '1' }];
    api.watches = [{ events: [], fail: new Error('other side closed') }];
    const t = source(api);
    s = t.s;
    await t.s.start();
    await until(() => t.logs.includes('config watch failed; restarting (keeping the last good config)'));
    expect(t.s.current().apis.map((a) => a.listenPath)).toEqual(['/a/']);
    // back: the relist sees a newer config; its watch then expires (410) and the next relist another
    api.watches = [{ events: [{ type: 'ERROR', object: { kind: 'Status', code: 410 } }] }];
    api.lists = [
      { items: [cm('7', configText('/b/'))], rv: '7' },
      { items: [cm('9', configText('/c/'))], rv: '9' },
    ];
    await until(() => t.applied.length === 3);
    expect(t.applied).toEqual(['/a/', '/b/', '/c/']);
    expect(t.logs).toContain('watch expired (410 Gone); relisting');
  });
});
