/**
 * The reader side of a sharded config (sidecar/config/shard-set.ts): an index applies only once every
 * listed shard is held at its SHA-256 (a shard written after the index was read is waited for); only the
 * shards whose SHA-256 changed are read again; a newer index replaces a pending one; a listen path in
 * two shards refuses the index.
 */
import { ShardSet } from '../../../sidecar/config/shard-set.js';
import { sha256Of, type ShardIndex } from '../../../contract/config-shards.js';
import type { CompiledConfig } from '../../../contract/config.js';

const part = (paths: string[]): string =>
  JSON.stringify({
    hash: paths.join(','),
    apis: paths.map((p) => ({
      namespace: 'ns',
      name: p,
      api_id: p,
      active: true,
      keyless: true,
      authHeader: 'authorization',
      listenPath: `/${p}/`,
      strip: true,
      endpointRules: [],
    })),
    policies: {},
  });

function harness() {
  const store = new Map<string, string>();
  const reads: string[] = [];
  const applied: CompiledConfig[] = [];
  const refused: string[] = [];
  const set = new ShardSet({
    read: async (name) => {
      reads.push(name);
      const t = store.get(name);
      return t === undefined ? undefined : { data: { 'config.json': t } };
    },
    onConfig: (c) => applied.push(c),
    onRefused: (r) => refused.push(r),
  });
  const index = (hash: string, names: string[]): ShardIndex => ({
    hash,
    shards: names.map((n) => ({ name: n, sha256: sha256Of(store.get(n) ?? `missing ${n}`) })),
  });
  return { store, reads, applied, refused, set, index };
}

const until = async (f: () => boolean, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('shard set', () => {
  test('applies once complete; a later index re-reads only the changed shard', async () => {
    const h = harness();
    h.store.set('gw-config-2', part(['a', 'b']));
    h.store.set('gw-config-3', part(['c']));
    h.set.load(h.index('h1', ['gw-config-2', 'gw-config-3']));
    await until(() => h.applied.length === 1);
    expect(h.applied[0]!.hash).toBe('h1');
    expect(h.applied[0]!.apis.map((a) => a.name).sort()).toEqual(['a', 'b', 'c']);
    h.reads.length = 0;
    h.store.set('gw-config-3', part(['c', 'dd']));
    h.set.load(h.index('h2', ['gw-config-2', 'gw-config-3']));
    await until(() => h.applied.length === 2);
    expect(h.reads).toEqual(['gw-config-3']);
    expect(h.applied[1]!.apis.map((a) => a.listenPath)).toEqual(['/dd/', '/a/', '/b/', '/c/']); // routing order
    h.set.stop();
  });

  test('a shard not matching the index yet is waited for (retried), then the whole index applies', async () => {
    const h = harness();
    h.store.set('gw-config-2', part(['a']));
    const want = part(['b']);
    const idx: ShardIndex = {
      hash: 'h',
      shards: [
        { name: 'gw-config-2', sha256: sha256Of(part(['a'])) },
        { name: 'gw-config-3', sha256: sha256Of(want) },
      ],
    };
    h.store.set('gw-config-3', part(['old']));
    h.set.load(idx);
    await new Promise((r) => setTimeout(r, 100));
    expect(h.applied).toHaveLength(0); // never half of it
    h.store.set('gw-config-3', want);
    await until(() => h.applied.length === 1);
    expect(h.applied[0]!.apis.map((a) => a.name).sort()).toEqual(['a', 'b']);
    h.set.stop();
  });

  test('a newer index replaces a pending one; a listen path in two shards refuses the index', async () => {
    const h = harness();
    h.store.set('gw-config-2', part(['a']));
    h.set.load({ hash: 'never', shards: [{ name: 'gw-config-9', sha256: sha256Of('nothing') }] });
    h.set.load(h.index('now', ['gw-config-2']));
    await until(() => h.applied.length === 1);
    await new Promise((r) => setTimeout(r, 400)); // the abandoned index's retry does nothing
    expect(h.applied.map((c) => c.hash)).toEqual(['now']);
    h.store.set('gw-config-3', part(['a']));
    h.set.load(h.index('dup', ['gw-config-2', 'gw-config-3']));
    await until(() => h.refused.length === 1);
    expect(h.refused[0]).toMatch(/listen path \/a\/ is in two shards/);
    expect(h.applied).toHaveLength(1);
    h.set.stop();
  });
});
