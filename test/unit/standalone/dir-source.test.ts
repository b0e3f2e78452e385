/**
 * Standalone's directory source when the directory itself cannot be read: nothing loaded is an empty
 * snapshot and loaded() false (never an undefined snapshot), and the next poll that can read it loads it.
 */
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { DirSource } from '../../../standalone/dir-source.js';
import { emptySnapshot } from '../../../compiler/snapshot.js';

const policy = 'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rate: 1, per: 1}\n';

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

  test('a first read that fails leaves an empty snapshot and loaded() false; a later read loads and notifies', () => {
    const dir = join(root, 'resources');
    writeFileSync(dir, 'not a directory');
    const source = new DirSource(dir, logger());
    expect(source.loaded()).toBe(false);
    expect(source.current()).toEqual(emptySnapshot());
    expect(logs).toEqual(['cannot read resources directory; nothing loaded yet: not ready until it can be read']);

    const seen: number[] = [];
    source.onChange((s) => seen.push(s.policies.length));
    source.onChange(() => {
      throw new Error('a failing listener');
    });
    unlinkSync(dir);
    mkdirSync(dir);
    writeFileSync(join(dir, 'p.yaml'), policy);
    expect(() => source.refresh()).not.toThrow();
    expect(source.loaded()).toBe(true);
    expect(source.current().policies.map((p) => p.metadata.name)).toEqual(['p']);
    expect(source.current().files?.get(source.current().policies[0]!)).toBe('p.yaml');
    expect(seen).toEqual([1]);
    expect(logs).toContain('applying resources failed');

    // gone again: the last good resources stay, and loaded() stays true
    rmSync(dir, { recursive: true });
    source.refresh();
    expect(source.loaded()).toBe(true);
    expect(source.current().policies).toHaveLength(1);
    expect(logs.at(-1)).toBe('cannot read resources directory; keeping the last good resources');
  });
});
