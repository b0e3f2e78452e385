/**
 * Standalone's directory source: a directory that cannot be read (nothing loaded is an empty snapshot and
 * loaded() false, never an undefined snapshot; the next read that can read it loads it), and the cost of a
 * change: only the files whose signature changed are read again, unchanged resources keep their objects,
 * and a burst of watch events is applied as one read within the coalescing delay.
 */
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { DirSource } from '../../../standalone/dir-source.js';
import { emptySnapshot, type ResourceSnapshot } from '../../../compiler/snapshot.js';
import { StandaloneState } from '../../../standalone/state.js';
import { MemorySessionStore } from '../../../stores/sessions-memory.js';
import { compileCounter } from '../../../compiler/compile-config.js';

const policy = (name = 'p', rate = 1): string =>
  `apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: ${name}}\nspec: {rate: ${rate}, per: 1}\n`;

describe('DirSource', () => {
  let root: string;
  let logs: string[];
  const logger = () =>
    pino({ level: 'info' }, { write: (line: string) => void logs.push((JSON.parse(line) as { msg: string }).msg) });
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'gw-dir-source-'));
    logs = [];
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  test('a first read that fails leaves an empty snapshot and loaded() false; a later read loads and notifies', async () => {
    const dir = join(root, 'resources');
    writeFileSync(dir, 'not a directory');
    const source = new DirSource(dir, logger());
    await source.load();
    expect(source.loaded()).toBe(false);
    expect(source.current()).toEqual(emptySnapshot());
    expect(logs).toEqual(['cannot read resources directory; nothing loaded yet: not ready until it can be read']);

    const seen: number[] = [];
    source.onChange((s) => void seen.push(s.policies.length));
    source.onChange(() => {
      throw new Error('a failing listener');
    });
    unlinkSync(dir);
    mkdirSync(dir);
    writeFileSync(join(dir, 'p.yaml'), policy());
    await expect(source.refresh()).resolves.toBeDefined();
    expect(source.loaded()).toBe(true);
    expect(source.current().policies.map((p) => p.metadata.name)).toEqual(['p']);
    expect(source.current().files?.get(source.current().policies[0]!)).toBe('p.yaml');
    expect(seen).toEqual([1]);
    expect(logs).toContain('applying resources failed');

    // gone again: the last good resources stay, and loaded() stays true
    rmSync(dir, { recursive: true });
    await source.refresh();
    expect(source.loaded()).toBe(true);
    expect(source.current().policies).toHaveLength(1);
    expect(logs.at(-1)).toBe('cannot read resources directory; keeping the last good resources');
    // the same failure again is not logged again
    const n = logs.length;
    await source.refresh();
    expect(logs.length).toBe(n);
    source.stop();
  });

  test('a change re-reads only the changed file: the others keep their resource objects; nothing changed, no notification', async () => {
    for (let i = 0; i < 20; i++) writeFileSync(join(root, `p${i}.yaml`), policy(`p${i}`));
    const source = new DirSource(root, logger());
    await source.load();
    const before = new Map(source.current().policies.map((p) => [p.metadata.name, p]));
    expect(before.size).toBe(20);
    const seen: ResourceSnapshot[] = [];
    source.onChange((s) => void seen.push(s));

    await source.refresh();
    expect(seen).toHaveLength(0);

    writeFileSync(join(root, 'p7.yaml'), policy('p7', 5));
    await source.changed(['p7.yaml']);
    expect(seen).toHaveLength(1);
    const after = source.current().policies;
    expect(after.map((p) => p.metadata.name)).toEqual([...before.keys()]);
    for (const p of after) {
      if (p.metadata.name === 'p7') expect(p.spec.rate).toBe(5);
      else expect(p).toBe(before.get(p.metadata.name));
    }

    // removed and added files, in walk order (earlier wins a conflict)
    unlinkSync(join(root, 'p3.yaml'));
    mkdirSync(join(root, 'a'));
    writeFileSync(join(root, 'p10b.yaml'), policy('new'));
    await source.changed(['p3.yaml', 'p10b.yaml']);
    const names = source.current().policies.map((p) => p.metadata.name);
    expect(names).not.toContain('p3');
    expect(names.indexOf('new')).toBe(names.indexOf('p10') + 1);
    // a path that is not a plain file (a new directory): a full listing, which finds its files
    writeFileSync(join(root, 'a', 'in-a.yaml'), policy('in-a'));
    await source.changed(['a']);
    expect(source.current().policies[0]!.metadata.name).toBe('in-a');
    source.stop();
  });

  test('a burst of watch events is coalesced: 200 files written apply in a few reads, the last within the delay', async () => {
    const source = new DirSource(root, logger());
    await source.load();
    let reads = 0;
    let latest = 0;
    source.onChange((s) => {
      reads++;
      latest = s.policies.length;
    });
    source.start();
    try {
      for (let i = 0; i < 200; i++) {
        writeFileSync(join(root, `b${i}.yaml`), policy(`b${i}`));
        if (i % 20 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      const end = Date.now() + 10_000;
      while (latest < 200 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(latest).toBe(200);
      expect(reads).toBeLessThan(50);
    } finally {
      source.stop();
    }
  });

  test('one edit is applied by the watch within a second', async () => {
    writeFileSync(join(root, 'p.yaml'), policy('p', 1));
    const source = new DirSource(root, logger());
    await source.load();
    source.start();
    try {
      const t0 = Date.now();
      writeFileSync(join(root, 'p.yaml'), policy('p', 2));
      while (source.current().policies[0]!.spec.rate !== 2 && Date.now() - t0 < 10_000)
        await new Promise((r) => setTimeout(r, 10));
      expect(source.current().policies[0]!.spec.rate).toBe(2);
      expect(Date.now() - t0).toBeLessThan(2000); // 1 s by design (MAX_DELAY_MS and a read), with room for a loaded machine
    } finally {
      source.stop();
    }
  });

  test('an API edit among 500 APIs and 2,000 keys: the other kinds keep their lists, one API compiled and decided, the keys left alone', async () => {
    const apiYaml = (i: number, listen = `/api-${i}/`): string =>
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: api-${i}}\nspec:\n  api_id: api-${i}\n  use_keyless: true\n  proxy: {listen_path: ${listen}}\n`;
    for (let i = 0; i < 500; i++) writeFileSync(join(root, `api-${i}.yaml`), apiYaml(i));
    for (let f = 0; f < 2; f++)
      writeFileSync(
        join(root, `keys-${f}.yaml`),
        Array.from(
          { length: 1000 },
          (_, k) =>
            `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${f}-${k}}\nspec: {key_hash: ${String(f * 1000 + k).padStart(64, 'a')}, rate: 1, per: 1}\n`,
        ).join('---\n'),
      );
    const source = new DirSource(root, logger());
    const sessions = new MemorySessionStore();
    const state = new StandaloneState(root, sessions, logger());
    source.onChange((s) => state.apply(s));
    await source.load();
    await state.apply(source.current());
    const before = source.current();
    expect(state.current().apis).toHaveLength(500);
    expect(before.keys).toHaveLength(2000);
    const keyApplies = state.keyApplies;
    const compiled = compileCounter.apis;

    writeFileSync(join(root, 'api-321.yaml'), apiYaml(321, '/moved/'));
    await source.changed(['api-321.yaml']);
    const after = source.current();
    expect(after.apis).not.toBe(before.apis);
    expect(after.keys).toBe(before.keys);
    expect(after.policies).toBe(before.policies);
    expect(after.files?.get(after.apis.find((a) => a.metadata.name === 'api-321')!)).toBe('api-321.yaml');
    expect(compileCounter.apis - compiled).toBe(1);
    expect(state.lastDecided).toBe(1);
    expect(state.keyApplies).toBe(keyApplies);
    expect(state.current().apis.find((a) => a.name === 'api-321')?.listenPath).toBe('/moved/');

    // a key file edited (rates changed, one key gone, one new): those keys alone, not all 2,000
    const keyHash = (f: number, k: number): string => String(f * 1000 + k).padStart(64, 'a');
    writeFileSync(
      join(root, 'keys-0.yaml'),
      [
        ...Array.from(
          { length: 999 },
          (_, k) =>
            `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-0-${k}}\nspec: {key_hash: ${keyHash(0, k)}, rate: 7, per: 1}\n`,
        ),
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: fresh}\nspec: {key_hash: ${'f'.repeat(64)}, rate: 3, per: 1}\n`,
      ].join('---\n'),
    );
    const edits = state.keyEdits;
    await source.changed(['keys-0.yaml']);
    expect(state.keyEdits).toBe(edits + 1);
    expect(state.keyApplies).toBe(keyApplies + 1);
    expect((await sessions.get(keyHash(0, 5)))?.session.rate).toBe(7);
    expect(await sessions.get(keyHash(0, 999))).toBeUndefined();
    expect(state.session(keyHash(0, 999))).toBeUndefined();
    expect((await sessions.get('f'.repeat(64)))?.session.rate).toBe(3);
    expect((await sessions.get(keyHash(1, 5)))?.session.rate).toBe(1);
    expect(source.current().apis).toBe(after.apis);

    // a key file edited into a policy: the keys gathered again, the APIs' list the same
    writeFileSync(join(root, 'keys-1.yaml'), policy('instead-of-keys'));
    await source.changed(['keys-1.yaml']);
    expect(source.current().apis).toBe(after.apis);
    expect(source.current().keys).toHaveLength(1000);
    expect(source.current().policies).toHaveLength(1);
    expect(state.keyApplies).toBe(keyApplies + 2);
    expect(state.keyEdits).toBe(edits + 1); // a new policy name: every key looked at again
    expect(await sessions.get(keyHash(1, 5))).toBeUndefined();
    expect((await sessions.get(keyHash(0, 5)))?.session.rate).toBe(7);
    expect(compileCounter.apis - compiled).toBe(1);
    source.stop();
  });
});
