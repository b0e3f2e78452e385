/**
 * The manifests parser at start-up: a directory larger than the split threshold is parsed by this
 * thread and the worker at once (both shares used), with the same results as parsing everything in place
 * (each file's resources and errors, naming the file and document).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManifestParser, type FileToParse } from '../../../standalone/parse-files.js';
import { loadManifestFile } from '../../../standalone/manifests.js';

const keyDoc = (f: number, k: number): string =>
  `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${f}-${k}}\nspec: {key_hash: ${`${f}x${k}`.padEnd(64, 'a').replace('x', 'b')}, rate: 1, per: 1}\n`;

test('a large start-up read is split between this thread and the worker, with the results of an in-place parse', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-parse-'));
  const parser = new ManifestParser();
  try {
    const files: FileToParse[] = [];
    for (let f = 0; f < 40; f++) {
      const docs = Array.from({ length: 100 }, (_, k) => keyDoc(f, k));
      if (f === 7) docs.push('apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: BAD}\nspec: {}\n');
      const text = docs.join('---\n');
      writeFileSync(join(dir, `keys-${f}.yaml`), text);
      files.push({ rel: `keys-${f}.yaml`, path: join(dir, `keys-${f}.yaml`), size: Buffer.byteLength(text) });
    }
    expect(files.reduce((s, f) => s + f.size, 0)).toBeGreaterThan(512 * 1024);
    const got = await parser.parse(files, true);
    expect([...got.keys()].sort()).toEqual(files.map((f) => f.rel).sort());
    for (const f of files) expect(got.get(f.rel)).toEqual(loadManifestFile(f.rel, f.path));
    const bad = got.get('keys-7.yaml');
    expect(bad && !bad.gone && bad.errors).toEqual([
      expect.objectContaining({ file: 'keys-7.yaml', index: 100, message: expect.stringContaining('metadata.name') }),
    ]);
    // both threads took a share: the worker was started (and is still there, idle)
    expect((parser as unknown as { worker?: unknown }).worker).toBeDefined();
  } finally {
    parser.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
