import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadManifestDir, formatLoadError } from '../../lib/manifests.js';

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
    const doc = (name: string, spec: string) => `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec: ${spec}`;
    writeFileSync(
      join(dir, 'mixed.yaml'),
      [
        doc('wrong-type', '{proxy: {listen_path: /w/}, global_rate_limit: {rate: ten, per: 1}}'),
        doc('ok-1', '{proxy: {listen_path: /ok1/}}'),
        doc('no-listen-path', '{global_rate_limit: {rate: 1, per: 1}}'),
        doc('bad-enum', '{proxy: {listen_path: /e/}, streaming: {streams: {s: {input: {http_server: {}}, output: {http_client: {url: "http://x.test/", verb: FETCH}}}}}}'),
        doc('ok-2', '{proxy: {listen_path: /ok2/}}'),
      ].join('\n---\n'),
    );
    writeFileSync(join(dir, 'list.json'), JSON.stringify([
      { apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'neg' }, spec: { rate: 1, per: -1 } },
      { apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'ok-3' }, spec: {} },
    ]));
    const r = loadManifestDir(dir);
    expect(r.resources.map((x) => x.resource.metadata.name).sort()).toEqual(['ok-1', 'ok-2', 'ok-3']);
    const msgs = r.errors.map(formatLoadError);
    expect(msgs).toEqual([
      'list.json (document 0): spec.per: Too small: expected number to be >=0',
      'mixed.yaml (document 0): spec.global_rate_limit.rate: Invalid input: expected number, received string',
      'mixed.yaml (document 2): spec.proxy.listen_path: proxy.listen_path is required unless spec.oas is given',
      expect.stringMatching(/^mixed\.yaml \(document 3\): spec\.streaming\.streams\.s\.output\.http_client\.verb: Invalid option: expected one of "GET"\|"POST"/),
    ]);
  });

  test('JSON files, nested folders, unknown kinds and broken YAML', () => {
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'p.json'), JSON.stringify({ apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'j' }, spec: {} }));
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
