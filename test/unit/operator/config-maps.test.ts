/**
 * Writing a sharded layout (controller/config-maps.ts): the first reconcile writes every shard and the index;
 * after one edit among 300 APIs only the edited API's shard is built, hashed and written (plus the index),
 * the other shards' texts are not built again; a ConfigMap changed behind the controller's back (another
 * resourceVersion) is compared and put back.
 */
import { compileConfig } from '../../../compiler/compile-config.js';
import { ApiDefinitionResource, type ApiDefinition } from '../../../crds/kinds.js';
import { layoutConfig } from '../../../controller/config-layout.js';
import { shardStats, writeLayout } from '../../../controller/config-maps.js';
import type { OperatorContext } from '../../../controller/context.js';
import type { KubeObject } from '../../../lib/kube/informer.js';
import { ruledApi } from '../../fixtures/ruled-api.js';
import { layoutSources } from '../../fixtures/layout-sources.js';

const api = (i: number, rate = 10): ApiDefinition =>
  ApiDefinitionResource.parse(
    ruledApi(i, {
      rate,
      per: 1,
      metadata: { namespace: 'ns', uid: `uid-${i}`, creationTimestamp: '2026-01-01T00:00:00Z' },
    }),
  );

const sources = layoutSources('2026-01-01T00:00:00Z');

/** ConfigMaps in memory, each write a new resourceVersion (what the informer cache holds after our writes). */
function memoryCtx() {
  const cms = new Map<string, KubeObject>();
  let rv = 0;
  const written: string[] = [];
  const store = (body: unknown): KubeObject => {
    const o = structuredClone(body) as KubeObject;
    o.metadata = { ...o.metadata, uid: o.metadata.uid ?? `cm-${o.metadata.name}`, resourceVersion: String(++rv) };
    cms.set(o.metadata.name, o);
    written.push(o.metadata.name);
    return o;
  };
  const ctx = {
    informers: {
      configMaps: {
        get: (_ns: string, name: string) => cms.get(name),
        list: () => [...cms.values()],
        remember: () => {},
      },
    },
    api: {
      put: async (_path: string, body: unknown) => store(body),
      post: async (_path: string, body: unknown) => store(body),
      delete: async () => {},
    },
    metrics: { writes: { inc: () => {} } },
    logger: { info: () => {} },
  } as unknown as OperatorContext;
  return { ctx, cms, written };
}

describe('writing the sharded config', () => {
  test('one edit among 300 APIs builds and writes one shard and the index; a hand edit is put back', async () => {
    const { ctx, cms, written } = memoryCtx();
    const defs = Array.from({ length: 300 }, (_, i) => api(i));
    const first = layoutConfig(compileConfig(defs, []).config, sources, 60_000);
    const shards = first.shards.length;
    expect(shards).toBeGreaterThan(8);
    const built0 = shardStats.built;
    await writeLayout(ctx, 'ns', first);
    expect(shardStats.built - built0).toBe(shards);
    expect(written).toHaveLength(shards + 1);

    // the same layout again (a resync, a status-only change): nothing built, nothing written
    written.length = 0;
    const built1 = shardStats.built;
    await writeLayout(ctx, 'ns', layoutConfig(compileConfig(defs, []).config, sources, 60_000));
    expect(shardStats.built - built1).toBe(0);
    expect(written).toEqual([]);

    // one API edited
    const edited = defs.map((d, i) => (i === 123 ? api(123, 99) : d));
    const built2 = shardStats.built;
    await writeLayout(ctx, 'ns', layoutConfig(compileConfig(edited, []).config, sources, 60_000));
    expect(shardStats.built - built2).toBe(1);
    expect(written).toHaveLength(2);
    expect(written[1]).toBe('gw-config');
    expect(cms.get(written[0]!)?.['data' as keyof KubeObject]).toBeDefined();

    // a shard changed behind the controller's back: compared and put back
    const victim = written[0]!;
    const cur = cms.get(victim)!;
    cms.set(victim, {
      ...cur,
      metadata: { ...cur.metadata, resourceVersion: 'hand' },
      data: { 'config.json': '{}' },
    } as KubeObject);
    written.length = 0;
    await writeLayout(ctx, 'ns', layoutConfig(compileConfig(edited, []).config, sources, 60_000));
    expect(written).toEqual([victim]);
  });
});
