/**
 * The incremental compiler (compiler/incremental-config.ts) against compileConfig: after every step of
 * random edits (added, removed, edited APIs whose listen paths and api_ids clash, with and without
 * creation timestamps, some invalid) it gives the same config (hash, served list in order) and the same
 * refusals as compiling everything with `serving` = the previous config; and an edit of one API among
 * 2,000 compiles that one API and decides again only the APIs it clashes with.
 */
import type { ApiDefinition, Policy } from '../../crds/kinds.js';
import { compileConfig, compileCounter, servingApis, type CompileProblem } from '../../compiler/compile-config.js';
import { IncrementalCompiler } from '../../compiler/incremental-config.js';
import type { CompiledConfig } from '../../contract/config.js';

let uid = 0;
function api(name: string, listen: string, apiId: string, created?: string, ns = 'default'): ApiDefinition {
  uid++;
  return {
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name, namespace: ns, ...(created ? { creationTimestamp: created } : {}) },
    spec: {
      api_id: apiId,
      use_keyless: true,
      active: true,
      // an unparseable endpoint pattern: a compile error (refused, naming the field)
      use_extended_paths: listen === '/bad/',
      extended_paths: {
        rate_limit: listen === '/bad/' ? [{ method: 'GET', path: '/(a+)+$', rate: 1, per: 1, enabled: true }] : [],
      },
      proxy: { listen_path: listen, target_url: `http://127.0.0.1:9/${uid}`, strip_listen_path: true },
    },
  } as unknown as ApiDefinition;
}

const policy = (name: string, rate: number): Policy =>
  ({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'Policy',
    metadata: { name, namespace: 'default' },
    spec: { rate, per: 1 },
  }) as unknown as Policy;

/** A deterministic random sequence (the test's failures reproduce). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * The refusals, a conflict as "conflicts" (which of two served APIs it names when it clashes with both
 * may differ: compileConfig names the one met first in that compile's order).
 */
const problemSet = (ps: CompileProblem[]): string[] =>
  ps.map((p) => `${p.kind} ${p.namespace}/${p.name}: ${p.conflictsWith ? 'conflicts' : p.message}`).sort();

/** Every conflict names a served API that has the refused one's listen path or namespace/api_id. */
function conflictsNameServed(ps: CompileProblem[], config: CompiledConfig): void {
  for (const p of ps) {
    if (!p.conflictsWith) continue;
    const res = p.resource as ApiDefinition;
    const other = config.apis.find(
      (a) => a.namespace === p.conflictsWith!.metadata.namespace && a.name === p.conflictsWith!.metadata.name,
    );
    expect(other).toBeDefined();
    expect(
      other!.listenPath === res.spec.proxy?.listen_path ||
        (other!.namespace === res.metadata.namespace && other!.api_id === res.spec.api_id),
    ).toBe(true);
    expect(p.message).toBe(
      `conflicts with ApiDefinition ${other!.namespace}/${other!.name} (same listen path or api_id)`,
    );
  }
}

describe('IncrementalCompiler', () => {
  test('random edits: the same config and refusals as compileConfig with serving = the previous config', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
      const listens = ['/a/', '/b/', '/c/', '/d/', '/a', '/bad/', '/e/f/', '/e/'];
      const ids = ['one', 'two', 'three', 'four', 'five'];
      const stamp = (): string | undefined => (r() < 0.5 ? undefined : `2026-01-0${1 + Math.floor(r() * 3)}T00:00:00Z`);
      // names unique (a manifest's namespace/name is what `serving` remembers)
      const fresh = (): ApiDefinition =>
        api(`n${uid}`, pick(listens), pick(ids), stamp(), r() < 0.2 ? 'other' : 'default');
      let apis: ApiDefinition[] = Array.from({ length: 6 }, fresh);
      let policies: Policy[] = [policy('p', 1)];
      const inc = new IncrementalCompiler();
      let previous: CompiledConfig | undefined;
      for (let step = 0; step < 150; step++) {
        const full = compileConfig(apis, policies, servingApis(previous));
        const got = await inc.update(apis, policies);
        const where = `seed ${seed} step ${step}`;
        expect({ where, apis: got.config.apis.map((a) => a.name + a.listenPath) }).toEqual({
          where,
          apis: full.config.apis.map((a) => a.name + a.listenPath),
        });
        expect({ where, hash: got.config.hash }).toEqual({ where, hash: full.config.hash });
        expect({ where, problems: problemSet(got.problems) }).toEqual({ where, problems: problemSet(full.problems) });
        conflictsNameServed(got.problems, got.config);
        previous = got.config;
        // the next edit: add, remove, replace (a file edited: a new object), move, or a policy change
        const next = [...apis];
        const what = r();
        if (what < 0.3 || next.length < 2) next.splice(Math.floor(r() * (next.length + 1)), 0, fresh());
        else if (what < 0.5) next.splice(Math.floor(r() * next.length), 1);
        else if (what < 0.8) {
          const i = Math.floor(r() * next.length);
          const old = next[i]!;
          next[i] = api(old.metadata.name, pick(listens), pick(ids), stamp(), old.metadata.namespace);
        } else if (what < 0.9) {
          const [moved] = next.splice(Math.floor(r() * next.length), 1);
          next.splice(Math.floor(r() * (next.length + 1)), 0, moved!);
        } else policies = [policy('p', step), ...(r() < 0.5 ? [policy('q', 2)] : [])];
        apis = next;
      }
    }
  });

  test("bursts: hundreds of APIs added and removed at once (a burst of files) give compileConfig's config", async () => {
    const r = rng(7);
    let apis: ApiDefinition[] = Array.from({ length: 300 }, (_, i) => api(`b${i}`, `/b${i}/`, `id${i}`));
    const inc = new IncrementalCompiler();
    let previous: CompiledConfig | undefined;
    for (let step = 0; step < 8; step++) {
      const full = compileConfig(apis, [], servingApis(previous));
      const got = await inc.update(apis, []);
      const where = `step ${step}`;
      expect({ where, apis: got.config.apis.map((a) => a.name + a.listenPath) }).toEqual({
        where,
        apis: full.config.apis.map((a) => a.name + a.listenPath),
      });
      expect({ where, hash: got.config.hash }).toEqual({ where, hash: full.config.hash });
      expect({ where, problems: problemSet(got.problems) }).toEqual({ where, problems: problemSet(full.problems) });
      previous = got.config;
      // 100–400 removed, 200–700 added at random places; a tenth of the new ones clash with a served API
      const next = apis.filter(() => r() > 0.1 + r() * 0.2);
      const adding = 200 + Math.floor(r() * 500);
      for (let k = 0; k < adding; k++) {
        const n = uid;
        const listen = r() < 0.1 ? `/b${Math.floor(r() * 300)}/` : `/s${step}-${n}/`;
        next.splice(Math.floor(r() * (next.length + 1)), 0, api(`s${step}-${n}`, listen, `sid${n}`));
      }
      apis = next;
    }
  });

  test("no APIs and no policies: compileConfig's config of nothing", async () => {
    const got = await new IncrementalCompiler().update([], []);
    expect(got.config).toEqual(compileConfig([], []).config);
  });

  test('one edit among 2,000 APIs compiles one API and decides again only its clash neighbourhood', async () => {
    const apis = Array.from({ length: 2000 }, (_, i) => api(`a${i}`, `/a${i}/`, `id${i}`));
    const inc = new IncrementalCompiler();
    await inc.update(apis, []);
    expect(inc.current().config.apis).toHaveLength(2000);

    // moved to a free listen path: itself only
    const before = compileCounter.apis;
    const edited = [...apis];
    edited[1234] = api('a1234', '/moved/', 'id1234');
    const moved = await inc.update(edited, []);
    expect(compileCounter.apis - before).toBe(1);
    expect(moved.delta.decided).toBe(1);
    expect(moved.delta.apiIdsChanged).toBe(false);
    expect(moved.config.apis.find((a) => a.name === 'a1234')?.listenPath).toBe('/moved/');
    expect(moved.config.hash).toBe(compileConfig(edited, []).config.hash);

    // moved onto another API's listen path: refused (that one serves), two decided
    const clash = [...edited];
    clash[1234] = api('a1234', '/a7/', 'id1234');
    const refused = await inc.update(clash, []);
    expect(compileCounter.apis - before).toBe(2);
    expect(refused.delta.decided).toBe(2);
    expect(refused.problems).toEqual([
      expect.objectContaining({
        name: 'a1234',
        message: expect.stringContaining('conflicts with ApiDefinition default/a7'),
      }),
    ]);
    expect(refused.config.apis).toHaveLength(1999);

    // the same objects again: nothing compiled, nothing decided, the same config object
    const again = await inc.update(clash, []);
    expect(again.config).toBe(refused.config);
    expect(again.delta.decided).toBe(0);
    expect(compileCounter.apis - before).toBe(2);
  });
});
