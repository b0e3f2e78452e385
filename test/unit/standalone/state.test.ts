/**
 * Standalone's reconciler when a Secret cannot be generated (DIR/.gw is not a directory): that AccessKey
 * is not served and says why; every other key is still served.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { pino } from 'pino';
import { validateDocument } from '../../../standalone/manifests.js';
import { MemorySessionStore } from '../../../stores/sessions-memory.js';
import { toSnapshot } from '../../../compiler/snapshot.js';
import { StandaloneState } from '../../../standalone/state.js';
import type { AnyResource } from '../../../crds/kinds.js';

const resources = (yaml: string): AnyResource[] =>
  parseAllDocuments(yaml).map((d) => {
    const v = validateDocument(d.toJS());
    if (!v.ok) throw new Error(v.message);
    return v.resource;
  });

test('a Secret that cannot be generated leaves only its AccessKey unserved, with a line naming it and why', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-state-'));
  try {
    writeFileSync(join(dir, '.gw'), 'a file where the .gw folder should be');
    const logs: string[] = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void logs.push((JSON.parse(line) as { msg: string }).msg) },
    );
    const sessions = new MemorySessionStore();
    const state = new StandaloneState(dir, sessions, logger);
    const [orphan, good] = resources(
      'apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: orphan}\nspec: {secretRef: {name: absent, key: key}}\n---\n' +
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: good}\nspec: {key_hash: ${'c'.repeat(64)}}\n`,
    );
    await state.apply(
      toSnapshot(
        [orphan!, good!],
        new Map([
          [orphan!, 'keys.yaml'],
          [good!, 'keys.yaml'],
        ]),
      ),
    );
    expect(await sessions.get('c'.repeat(64))).toMatchObject({ name: 'good' });
    expect(logs).not.toContain('applying resources failed');
    expect(logs.filter((l) => l !== 'config applied')).toEqual([
      expect.stringMatching(
        /^AccessKey default\/orphan \(keys\.yaml\) not served: Secret default\/absent does not exist and cannot be generated: E/,
      ),
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an edit that changes no key, Secret, client, api_id or policy name leaves the keys alone, one that changes no API or Policy leaves the compiled config alone', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-state-'));
  try {
    const logs: string[] = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void logs.push((JSON.parse(line) as { msg: string }).msg) },
    );
    let puts = 0;
    const sessions = new MemorySessionStore();
    const put = sessions.put.bind(sessions);
    sessions.put = (h, s) => {
      puts++;
      return put(h, s);
    };
    const state = new StandaloneState(dir, sessions, logger);
    const api = (path: string, id = 'orders') =>
      resources(
        `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: orders}\nspec: {api_id: ${id}, use_keyless: true, proxy: {listen_path: ${path}}}\n`,
      )[0]!;
    const keys = Array.from(
      { length: 300 },
      (_, i) =>
        resources(
          `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k${i}}\nspec: {key_hash: a${i.toString(16).padStart(63, '0')}, access_rights: {orders: {}}}\n`,
        )[0]!,
    );
    await state.apply(toSnapshot([api('/a/'), ...keys]));
    expect(puts).toBe(300);
    expect(state.keyApplies).toBe(1);
    expect(state.compiles).toBe(1);

    // the API's listen path changed, the same key objects: served at once, the keys not gone through
    const apiB = api('/b/');
    await state.apply(toSnapshot([apiB, ...keys]));
    expect(state.current().apis[0]!.listenPath).toBe('/b/');
    expect(state.keyApplies).toBe(1);
    expect(puts).toBe(300);
    expect(state.compiles).toBe(2);

    // one key changed (a new object): the keys gone through, one session written
    const edited = resources(
      `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k7}\nspec: {key_hash: a${(7).toString(16).padStart(63, '0')}, rate: 5, per: 1, access_rights: {orders: {}}}\n`,
    )[0]!;
    await state.apply(toSnapshot([apiB, ...keys.map((k, i) => (i === 7 ? edited : k))]));
    expect(state.keyApplies).toBe(2);
    expect(puts).toBe(301);
    expect(state.compiles).toBe(2); // the same ApiDefinition objects: the config is not compiled again

    // the api_id the keys name went away: their notes say so, though no key object changed
    logs.length = 0;
    await state.apply(toSnapshot([api('/b/', 'billing'), ...keys.map((k, i) => (i === 7 ? edited : k))]));
    expect(state.keyApplies).toBe(3);
    expect(logs.some((l) => /AccessKey default\/k0 .*refers to something missing: .*orders/.test(l))).toBe(true);
    expect(puts).toBe(301); // which api_ids exist changes notes, not sessions

    // back again: the notes are gone (a later loss logs them again), still no session written
    const current = keys.map((k, i) => (i === 7 ? edited : k));
    logs.length = 0;
    await state.apply(toSnapshot([api('/b/'), ...current]));
    expect(logs.filter((l) => /refers to something missing/.test(l))).toEqual([]);
    await state.apply(toSnapshot([api('/b/', 'billing'), ...current]));
    expect(logs.filter((l) => /AccessKey default\/k\d+ .*refers to something missing: .*orders/.test(l))).toHaveLength(
      300,
    );
    expect(puts).toBe(301);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('keysOf: the AccessKey serving each key hash, kept edit by edit, for the snapshot last applied only', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-state-'));
  try {
    const logger = pino({ level: 'silent' });
    const state = new StandaloneState(dir, new MemorySessionStore(), logger);
    const key = (name: string, hash: string): AnyResource =>
      resources(
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: ${name}}\nspec: {key_hash: ${hash}}\n`,
      )[0]!;
    const [a, b, twin] = [key('a', 'a'.repeat(64)), key('b', 'b'.repeat(64)), key('twin', 'a'.repeat(64))];
    const files = new Map([a, b, twin].map((r) => [r, 'keys.yaml'] as [AnyResource, string]));
    const first = toSnapshot([a, twin], files);
    await state.apply(first);
    // the first of two keys with one hash serves it
    expect(state.keysOf(first)?.get('a'.repeat(64))).toBe(a);
    expect(state.keysOf(first)?.get('b'.repeat(64))).toBeUndefined();
    const second = toSnapshot([a, twin, b], files);
    expect(state.keysOf(second)).toBeUndefined(); // not applied yet
    await state.apply(second);
    expect(state.keysOf(second)?.get('b'.repeat(64))).toBe(b);
    expect(state.keysOf(first)).toBeUndefined(); // no longer the one applied
    const third = toSnapshot([twin, b], files);
    await state.apply(third);
    expect(state.keysOf(third)?.get('a'.repeat(64))).toBe(twin);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
