import { mkdtempSync, writeFileSync, rmSync, mkdirSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  loadListing,
  loadManifestDir,
  loadManifestText,
  formatLoadError,
  type LoadResult,
} from '../../standalone/manifests.js';
import { isProblem, listManifests } from '../../lib/manifest-walk.js';
import { MAX_MANIFEST_BYTES, readManifestFile } from '../../lib/manifest-read.js';
import { run } from '../helpers/chart-tools.js';

describe('manifest loading', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-manifests-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('multi-document YAML: a bad document is reported with file, index and field; the good ones load', () => {
    writeFileSync(
      join(dir, 'apis.yaml'),
      [
        'apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: good}\nspec: {proxy: {listen_path: /g/}}',
        'apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: bad}\nspec: {proxy: {listen_path: /b/}, global_rate_limit: {rate: -5, per: 1}}',
        'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rate: 1, per: 1}',
      ].join('\n---\n'),
    );
    const r = loadManifestDir(dir);
    expect(r.resources.map((x) => x.resource.metadata.name)).toEqual(['good', 'p']);
    expect(r.errors).toHaveLength(1);
    const msg = formatLoadError(r.errors[0]!);
    expect(msg).toContain('apis.yaml');
    expect(msg).toContain('document 1');
    expect(msg).toContain('spec.global_rate_limit.rate');
    expect(msg).toMatch(/spec\.global_rate_limit\.rate: Too small: expected number to be >=0/); // the rule
  });

  test('every error names file, document index, field path and rule; good documents around bad ones load', () => {
    const doc = (name: string, spec: string) =>
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec: ${spec}`;
    writeFileSync(
      join(dir, 'mixed.yaml'),
      [
        doc('wrong-type', '{proxy: {listen_path: /w/}, global_rate_limit: {rate: ten, per: 1}}'),
        doc('ok-1', '{proxy: {listen_path: /ok1/}}'),
        doc('no-listen-path', '{global_rate_limit: {rate: 1, per: 1}}'),
        doc(
          'bad-enum',
          '{proxy: {listen_path: /e/}, streaming: {streams: {s: {input: {http_server: {}}, output: {http_client: {url: "http://x.test/", verb: FETCH}}}}}}',
        ),
        doc('ok-2', '{proxy: {listen_path: /ok2/}}'),
      ].join('\n---\n'),
    );
    writeFileSync(
      join(dir, 'list.json'),
      JSON.stringify([
        { apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'neg' }, spec: { rate: 1, per: -1 } },
        { apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'ok-3' }, spec: {} },
      ]),
    );
    const r = loadManifestDir(dir);
    expect(r.resources.map((x) => x.resource.metadata.name).sort()).toEqual(['ok-1', 'ok-2', 'ok-3']);
    const msgs = r.errors.map(formatLoadError);
    expect(msgs).toEqual([
      'list.json (document 0): spec.per: Too small: expected number to be >=0',
      'mixed.yaml (document 0): spec.global_rate_limit.rate: Invalid input: expected number, received string',
      'mixed.yaml (document 2): spec.proxy.listen_path: proxy.listen_path is required unless spec.oas is given',
      expect.stringMatching(
        /^mixed\.yaml \(document 3\): spec\.streaming\.streams\.s\.output\.http_client\.verb: Invalid option: expected one of "GET"\|"POST"/,
      ),
    ]);
  });

  test('JSON files, nested folders, unknown kinds and broken YAML', () => {
    mkdirSync(join(dir, 'sub'));
    writeFileSync(
      join(dir, 'sub', 'p.json'),
      JSON.stringify({ apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'j' }, spec: {} }),
    );
    writeFileSync(join(dir, 'x.yml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n');
    writeFileSync(join(dir, 'broken.yaml'), 'kind: [unclosed\n');
    writeFileSync(join(dir, 'notes.txt'), 'ignored');
    const r = loadManifestDir(dir);
    expect(r.resources.map((x) => x.resource.metadata.name)).toEqual(['j']);
    const msgs = r.errors.map(formatLoadError).join('\n');
    expect(msgs).toMatch(/x\.yml \(document 0\): kind: must be one of/);
    expect(msgs).toMatch(/broken\.yaml \(document 0\): invalid YAML/);
  });
});

describe('manifest loading: YAML 1.1 booleans (yes/no/on/off/y/n), read as kubectl reads them', () => {
  const kubectlRead = (word: string, value: boolean, field: string): string =>
    `${field}: ${word} is read as ${value}, as kubectl reads YAML (1.1; YAML 1.2 reads the string "${word}"): write ${value} for the boolean, or quote it ("${word}") for the string`;

  test('a plain one is the boolean kubectl sends (a warning naming the field); quoted, it stays a string', () => {
    const into: LoadResult = { resources: [], errors: [], files: [] };
    loadManifestText(
      [
        'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: plain}\nspec: {rate: 1, per: 1, active: off}',
        'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata:\n  name: block\n  labels: {team: "no"}\nspec:\n  rate: 1\n  per: 1\n  active: Yes',
        // a string field given `no`: false, which the schema refuses as the API server would
        'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata:\n  name: no\nspec: {rate: 1, per: 1}',
      ].join('\n---\n'),
      'p.yaml',
      into,
    );
    expect(
      into.resources.map((r) => [
        r.resource.metadata.name,
        (r.resource as { spec?: { active?: unknown } }).spec?.active,
      ]),
    ).toEqual([
      ['plain', false],
      ['block', true],
    ]);
    expect((into.resources[1]!.resource.metadata.labels as Record<string, string>).team).toBe('no');
    expect(into.warnings!.map(formatLoadError)).toEqual([
      `p.yaml (document 0): ${kubectlRead('off', false, 'spec.active')}`,
      `p.yaml (document 1): ${kubectlRead('Yes', true, 'spec.active')}`,
      `p.yaml (document 2): ${kubectlRead('no', false, 'metadata.name')}`,
    ]);
    expect(into.errors.map(formatLoadError)).toEqual([
      expect.stringMatching(
        /^p\.yaml \(document 2\): metadata\.name: Invalid input: expected string, received boolean/,
      ),
    ]);
  });

  test('in a sequence, a flow collection and as a key; true/false and other words are not warned about', () => {
    const into: LoadResult = { resources: [], errors: [], files: [] };
    loadManifestText('a: [y, n]\nb:\n  - on\nc: {on: 1}\nd: true\ne: yesterday\nf: "off"\n', 'x.yaml', into);
    expect(into.warnings!.map((w) => w.issues![0]!.field)).toEqual(['a.0', 'a.1', 'b.0', 'c.on (a key)']);
    // not a gw kind: refused, but what was read is what kubectl reads
    expect(into.errors.map((e) => e.issues?.[0]?.field)).toEqual(['kind']);
  });

  test('a text without any is read by the fast readers, with no warning', () => {
    const into: LoadResult = { resources: [], errors: [], files: [] };
    loadManifestText(
      'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rate: 1, per: 1, active: false}\n',
      'p.yaml',
      into,
    );
    expect(into.warnings).toBeUndefined();
    expect(into.resources).toHaveLength(1);
  });
});

describe('manifest loading: a directory that cannot be trusted', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-manifests-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const policy = (name: string): string =>
    `apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: ${name}}\nspec: {rate: 1, per: 1}\n`;

  test('symbolic-link loops, a link to nothing, a directory linked twice and a FIFO are problems naming the path; the rest is listed in read order', async () => {
    writeFileSync(join(dir, 'a.yaml'), policy('a'));
    symlinkSync('lb.yaml', join(dir, 'la.yaml'));
    symlinkSync('la.yaml', join(dir, 'lb.yaml'));
    symlinkSync('nowhere.yaml', join(dir, 'dangling.yaml'));
    mkdirSync(join(dir, 'real'));
    writeFileSync(join(dir, 'real', 'r.yaml'), policy('r'));
    symlinkSync('../real', join(dir, 'real', 'self'));
    symlinkSync('real', join(dir, 'z-alias'));
    await run('mkfifo', [join(dir, 'pipe.yaml')]);
    const listed = listManifests(dir).entries.map((e) => (isProblem(e) ? `${e.rel} ! ${e.problem}` : e.rel));
    expect(listed).toEqual([
      'a.yaml',
      'dangling.yaml ! skipped: symbolic link to a missing file',
      'la.yaml ! skipped: symbolic link loop',
      'lb.yaml ! skipped: symbolic link loop',
      'pipe.yaml ! skipped: a FIFO, not a regular file',
      'real/r.yaml',
      'real/self ! skipped: symbolic link loop (leads back to real)',
      'z-alias ! skipped: the same directory as real, read there',
    ]);
    const r = loadManifestDir(dir);
    expect(r.resources.map((x) => x.resource.metadata.name)).toEqual(['a', 'r']);
    expect(r.errors.map(formatLoadError)).toContain('la.yaml: skipped: symbolic link loop');
  });

  test('a file or directory whose name is not valid UTF-8 is a problem naming it, not skipped unseen', () => {
    writeFileSync(join(dir, 'a.yaml'), policy('a'));
    writeFileSync(Buffer.from(join(dir, 'b\xffad.yaml'), 'latin1'), policy('BAD'));
    mkdirSync(Buffer.from(join(dir, 'd\xfe'), 'latin1'));
    const listed = listManifests(dir).entries.map((e) => (isProblem(e) ? `${e.rel} ! ${e.problem}` : e.rel));
    expect(listed).toEqual([
      'a.yaml',
      'b\uFFFDad.yaml ! skipped: its name is not valid UTF-8 (rename it)',
      'd\uFFFD ! skipped: its name is not valid UTF-8 (rename it)',
    ]);
    expect(loadManifestDir(dir).errors.map(formatLoadError)).toContain(
      'b\uFFFDad.yaml: skipped: its name is not valid UTF-8 (rename it)',
    );
  });

  test('a file deleted between listing and reading is absent, not an error', () => {
    writeFileSync(join(dir, 'a.yaml'), policy('a'));
    writeFileSync(join(dir, 'b.yaml'), policy('b'));
    const listing = listManifests(dir);
    unlinkSync(join(dir, 'a.yaml'));
    const r = loadListing(listing);
    expect(r.errors).toEqual([]);
    expect(r.files).toEqual(['b.yaml']);
    expect(r.resources.map((x) => x.resource.metadata.name)).toEqual(['b']);
  });

  test('a file over the size limit is refused naming its size and the limit', () => {
    writeFileSync(join(dir, 'big.yaml'), 'x'.repeat(MAX_MANIFEST_BYTES + 1));
    writeFileSync(join(dir, 'ok.yaml'), policy('ok'));
    const r = loadManifestDir(dir);
    expect(r.errors.map(formatLoadError)).toEqual([
      `big.yaml: too large: ${MAX_MANIFEST_BYTES + 1} bytes, over the limit of ${MAX_MANIFEST_BYTES} bytes per manifest file (split it into several files)`,
    ]);
    expect(r.resources.map((x) => x.resource.metadata.name)).toEqual(['ok']);
    expect(readManifestFile(join(dir, 'ok.yaml'), 10)).toEqual({
      ok: false,
      message: expect.stringMatching(/^too large: \d+ bytes, over the limit of 10 bytes/),
    });
  });

  test('files read one after another into the reused buffer: each read back exactly (a large one, then smaller ones)', () => {
    const big = `# ${'x'.repeat(200_000)}\n${policy('big')}`;
    writeFileSync(join(dir, 'a.yaml'), big);
    writeFileSync(join(dir, 'b.yaml'), policy('b'));
    writeFileSync(join(dir, 'c.yaml'), '');
    expect(readManifestFile(join(dir, 'a.yaml'))).toEqual({ ok: true, text: big });
    expect(readManifestFile(join(dir, 'b.yaml'))).toEqual({ ok: true, text: policy('b') });
    expect(readManifestFile(join(dir, 'c.yaml'))).toEqual({ ok: true, text: '' });
    expect(readManifestFile(join(dir, 'a.yaml'))).toEqual({ ok: true, text: big });
  });

  test('a UTF-16 or UTF-32 file is refused naming the file and its encoding; a UTF-8 byte-order mark is read past', () => {
    const text = policy('p16');
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
    const be = Buffer.from(le.map((_, i) => le[i ^ 1]!)); // each UTF-16 unit's bytes swapped
    writeFileSync(join(dir, 'a-le.yaml'), le);
    writeFileSync(join(dir, 'b-be.yaml'), be);
    writeFileSync(join(dir, 'c-32.yaml'), Buffer.from([0xff, 0xfe, 0, 0, 0x61, 0, 0, 0]));
    writeFileSync(join(dir, 'd-nobom.json'), Buffer.from(text, 'utf16le'));
    writeFileSync(
      join(dir, 'e-bom8.yaml'),
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(policy('bom8'))]),
    );
    writeFileSync(
      join(dir, 'f-bom8.json'),
      `\ufeff${JSON.stringify({ apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'bom8json' }, spec: { rate: 1, per: 1 } })}`,
    );
    const r = loadManifestDir(dir);
    const utf8 = 'gw reads manifests as UTF-8 (save it as UTF-8)';
    expect(r.errors.map(formatLoadError)).toEqual([
      `a-le.yaml: not UTF-8: encoded as UTF-16LE (a byte-order mark); ${utf8}`,
      `b-be.yaml: not UTF-8: encoded as UTF-16BE (a byte-order mark); ${utf8}`,
      `c-32.yaml: not UTF-8: encoded as UTF-32LE (a byte-order mark); ${utf8}`,
      `d-nobom.json: not UTF-8 text: it has NUL bytes (UTF-16 without a byte-order mark?); ${utf8}`,
    ]);
    expect(r.resources.map((x) => x.resource.metadata.name)).toEqual(['bom8', 'bom8json']);
  });

  test('a FIFO put where a file was listed is refused at once (opened non-blocking), not waited on', async () => {
    const fifo = join(dir, 'late.yaml');
    await run('mkfifo', [fifo]);
    // in a child process: a blocking open would hang it, not this test worker
    const code = `import(${JSON.stringify(resolve('dist/lib/manifest-read.js'))}).then((m) => console.log(JSON.stringify(m.readManifestFile(process.argv[1]))))`;
    const r = await run(process.execPath, ['--input-type=module', '-e', code, fifo], { timeoutMs: 10_000 });
    expect(JSON.parse(r.stdout)).toEqual({ ok: false, message: 'skipped: not a regular file' });
  });

  test('an alias bomb or nesting deeper than the stack is an error naming the file and document, never a throw', () => {
    const bomb = [
      'a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]',
      ...Array.from({ length: 9 }, (_, i) => `a${i + 1}: &a${i + 1} [${Array(10).fill(`*a${i}`).join(', ')}]`),
    ].join('\n');
    const into: LoadResult = { resources: [], errors: [], files: [] };
    loadManifestText(`${policy('before')}---\n${bomb}\n---\n${policy('after')}`, 'bomb.yaml', into);
    loadManifestText(`${'['.repeat(50_000)}${']'.repeat(50_000)}`, 'deep.yaml', into);
    expect(into.errors.map(formatLoadError)).toEqual([
      expect.stringMatching(/^bomb\.yaml \(document 1\): invalid YAML: Excessive alias count/),
      // refused by the scan before any parser (lib/yaml-depth.ts): the whole file, naming the rule and where
      'deep.yaml: invalid YAML: nested deeper than 66 levels (document 0, line 1, column 69): not parsed',
    ]);
    expect(into.resources.map((x) => x.resource.metadata.name)).toEqual(['before', 'after']);
  });
});
