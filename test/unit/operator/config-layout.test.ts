/**
 * The sharded layout of a namespace's compiled config (controller/config-layout.ts) and its reassembly
 * (contract/config-shards.ts): inline while it fits; past the budget, shards within the budget holding each
 * resource once, the same layout for the same content whatever the order, one edit changing one shard,
 * a resource alone over the budget refused alone, and the shards put back together equal to the config.
 */
import { compileConfig } from '../../../compiler/compile-config.js';
import { ApiDefinitionResource, PolicyResource, type ApiDefinition } from '../../../crds/kinds.js';
import { layoutConfig, shardHash, shardText, type Layout } from '../../../controller/config-layout.js';
import { assembleShards } from '../../../contract/config-shards.js';
import { parseCompiledConfig } from '../../../contract/config-schema.js';
import { ruledApi } from '../../fixtures/ruled-api.js';
import { layoutSources } from '../../fixtures/layout-sources.js';

const api = (i: number, rules = 20, extra: Record<string, unknown> = {}): ApiDefinition =>
  ApiDefinitionResource.parse(
    ruledApi(i, {
      rules,
      rate: 10,
      per: 1,
      metadata: {
        namespace: 'ns',
        uid: `uid-${i}`,
        creationTimestamp: `2026-01-01T00:00:${String(i % 60).padStart(2, '0')}Z`,
      },
      spec: extra,
    }),
  );

const policy = (name: string) =>
  PolicyResource.parse({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'Policy',
    metadata: { name, namespace: 'ns', uid: `uid-${name}` },
    spec: { rate: 5, per: 1 },
  });

const sources = layoutSources('');

function texts(l: Layout): Map<number, string> {
  return new Map(l.shards.map((s) => [s.index, shardText(shardHash(s.items), s.items)]));
}

describe('config layout', () => {
  test('a config that fits stays inline, as the one-ConfigMap form (same text as JSON.stringify)', () => {
    const { config } = compileConfig([api(1), api(2)], [policy('p')]);
    const l = layoutConfig(config, sources, 900_000);
    expect(l.shards.map((s) => s.index)).toEqual([1]);
    expect(l.refused).toEqual([]);
    expect(shardText(config.hash, l.shards[0]!.items)).toBe(JSON.stringify(config));
  });

  test('past the budget: shards within it, every resource once, reassembled equal to the config', () => {
    const defs = Array.from({ length: 300 }, (_, i) => api(i));
    const { config } = compileConfig(defs, [policy('a'), policy('b')]);
    const budget = 60_000;
    const l = layoutConfig(config, sources, budget);
    expect(l.shards.length).toBeGreaterThan(8);
    expect(l.refused).toEqual([]);
    const parts = [];
    for (const [index, text] of texts(l)) {
      expect(index).toBeGreaterThan(1);
      expect(Buffer.byteLength(text)).toBeLessThan(budget);
      const r = parseCompiledConfig(text);
      if (!r.ok) throw new Error(r.message);
      parts.push(r.config);
    }
    const whole = assembleShards(config.hash, parts);
    if (!whole.ok) throw new Error(whole.message);
    expect(whole.config).toEqual(config); // key order aside (the schema orders keys)
  });

  test('the layout depends on the content, not the order; one edit changes one shard', () => {
    const defs = Array.from({ length: 300 }, (_, i) => api(i));
    const a = texts(layoutConfig(compileConfig(defs, []).config, sources, 60_000));
    const b = texts(layoutConfig(compileConfig([...defs].reverse(), []).config, sources, 60_000));
    expect([...b]).toEqual([...a]);
    const edited = defs.map((d, i) => (i === 123 ? api(123, 19) : d));
    const c = texts(layoutConfig(compileConfig(edited, []).config, sources, 60_000));
    expect([...c.keys()]).toEqual([...a.keys()]);
    const changed = [...c].filter(([k, t]) => a.get(k) !== t).map(([k]) => k);
    expect(changed).toHaveLength(1);
    expect(c.get(changed[0]!)).toContain('"api-123"');
  });

  test('a resource alone over the budget is refused alone; the others are laid out', () => {
    const big = api(7, 400);
    const { config } = compileConfig([api(1), big, api(2)], [policy('p')]);
    const l = layoutConfig(config, sources, 30_000);
    expect(l.refused.map((r) => `${r.item.kind}/${r.item.name}`)).toEqual(['ApiDefinition/api-7']);
    expect(l.refused[0]!.message).toMatch(/over the ConfigMap shard budget/);
    expect(l.served.apis.map((a) => a.name).sort()).toEqual(['api-1', 'api-2']);
    expect(Object.keys(l.served.policies)).toEqual(['ns/p']);
    expect(l.served.hash).not.toBe(config.hash);
    expect(l.shards.flatMap((s) => s.items.map((i) => i.name)).sort()).toEqual(['api-1', 'api-2', 'p']);
  });
});
