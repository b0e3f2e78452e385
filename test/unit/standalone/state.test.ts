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
import { MemorySessionStore } from '../../../contract/sessions.js';
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
