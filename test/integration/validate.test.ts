/**
 * `gw validate` (the real binary): the project's examples pass; every bad manifest the schema, operator and
 * standalone suites use is refused naming the field (and the Ready reason) the controller's status names;
 * stdin; a 10,000-manifest directory; the exit codes. And `gw version` / `gw --version`, with the same
 * facts in a running gw's /healthz and its gw_build_info gauge.
 */
import { jest } from '@jest/globals';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { RESOURCE_SCHEMAS } from '../../crds/kinds.js';
import { firstIssue } from '../../controller/context.js';
import { sha256hex } from '../../lib/hash.js';
import { buildInfo } from '../../lib/build-info.js';
import type { Problem } from '../../standalone/validate.js';
import { loadManifestText, type LoadResult } from '../../standalone/manifests.js';
import { bad } from '../fixtures/bad-manifests.js';
import { apiYaml, writeRefusedManifests } from '../fixtures/refused-manifests.js';
import { writeManyManifests } from '../fixtures/many-manifests.js';
import { runGw, type Run } from '../helpers/gw-cli.js';
import { cleanup, startStandalone, tempDir } from '../helpers/standalone.js';
import { accessKey, apiDef, oauthClient, policy, secret } from './operator/helpers.js';

jest.setTimeout(60_000);

const gw = (args: string[], stdin?: string | Uint8Array): Promise<Run> =>
  runGw(args, { url: 'http://127.0.0.1:1', ...(stdin !== undefined ? { stdin } : {}) });

/** `--output json`: one problem per line. */
const problemsOf = (r: Run): Problem[] =>
  r.stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Problem);

const yamlDocs = (docs: unknown[]): string => docs.map((d) => stringify(d)).join('---\n');

/** `gw validate --output json` on the paths (`-`: stdin): the run and its problems. */
async function validateJson(paths: string[], stdin?: string | Uint8Array): Promise<Run & { problems: Problem[] }> {
  const r = await gw(['validate', '--output', 'json', ...paths], stdin);
  return { ...r, problems: problemsOf(r) };
}

let dir: string;
beforeAll(() => {
  dir = tempDir('gw-validate-');
});
/** A new directory of that name in the suite's directory. */
const subdir = (name: string): string => {
  const d = join(dir, name);
  mkdirSync(d);
  return d;
};
afterAll(() => cleanup(dir));

describe('gw validate', () => {
  test("the project's examples/ are valid: exit 0, no problem printed, the summary on stderr", async () => {
    const r = await gw(['validate', 'examples']);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^gw validate: \d+ file\(s\), \d+ document\(s\): 0 error\(s\), 0 warning\(s\)\n$/);
    expect(r.code).toBe(0);
  });

  test('stdin (-f -): the examples piped in are valid (files run together without --- are named as such); a bad document on stdin is named as file "-"', async () => {
    const text = readdirSync('examples')
      .filter((f) => /\.ya?ml$/.test(f))
      .map((f) => readFileSync(join('examples', f), 'utf8'))
      .join('\n---\n');
    const ok = await gw(['validate', '-f', '-'], text);
    expect({ code: ok.code, stdout: ok.stdout }).toEqual({ code: 0, stdout: '' });
    // the same files run together without a '---' between them: the error says so
    const joined = await gw(
      ['validate', '-f', '-'],
      readFileSync(join('examples', '04-keys.yaml'), 'utf8') +
        readFileSync(join('examples', '01-echo-api.yaml'), 'utf8'),
    );
    expect(joined.code).toBe(1);
    expect(joined.stdout).toContain('Map keys must be unique');
    expect(joined.stdout).toContain("two manifests without a '---' line between them?");
    // a key repeated inside one manifest is not taken for that
    const repeated = await gw(
      ['validate', '-f', '-'],
      'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec:\n  rate: 1\n  rate: 2\n',
    );
    expect(repeated.stdout).toContain('Map keys must be unique');
    expect(repeated.stdout).not.toContain("'---'");
    const bad1 = await gw(
      ['validate', '--output', 'json', '-f', '-'],
      yamlDocs([apiDef('neg', { proxy: { listen_path: '/neg/' }, global_rate_limit: { rate: -1, per: 1 } })]),
    );
    expect(bad1.code).toBe(1);
    expect(problemsOf(bad1)).toEqual([
      expect.objectContaining({
        severity: 'error',
        file: '-',
        document: 0,
        kind: 'ApiDefinition',
        namespace: 'default',
        name: 'neg',
        field: 'spec.global_rate_limit.rate',
        rule: 'schema',
        reason: 'InvalidSpec',
      }),
    ]);
  });

  test("every document of the schema table (zod vs the API server) is refused naming the field the controller's Ready names", async () => {
    const d = subdir('schema');
    bad.forEach(([, doc], i) => writeFileSync(join(d, `case-${String(i).padStart(3, '0')}.yaml`), stringify(doc)));
    const r = await validateJson([d]);
    expect(r.code).toBe(1);
    const problems = r.problems;
    bad.forEach(([name, doc, zodNeedle], i) => {
      const mine = problems.filter((p) => p.file === join(d, `case-${String(i).padStart(3, '0')}.yaml`));
      const kind = (doc as { kind: keyof typeof RESOURCE_SCHEMAS }).kind;
      const parsed = RESOURCE_SCHEMAS[kind].safeParse(doc);
      // what reconcile-key/-config/-client write into Ready (InvalidSpec): the first issue, `field: message`
      const status = parsed.success ? 'accepted' : firstIssue(parsed.error);
      expect({ name, first: mine[0] && `${mine[0].field}: ${mine[0].message}`, rule: mine[0]?.rule }).toEqual({
        name,
        first: status,
        rule: 'schema',
      });
      expect(mine.map((p) => `${p.field}: ${p.message}`).join('; ')).toContain(zodNeedle);
    });
  });

  test("the operator suite's refusals and missing references: each named with the controller's Ready reason and its field", async () => {
    const d = subdir('operator');
    const h = (s: string): string => sha256hex(s);
    // test/integration/operator/operator.test.ts, as applied there (namespace default here)
    writeFileSync(
      join(d, 'apis.yaml'),
      yamlDocs([
        apiDef('petstore', {
          api_id: 'pets',
          proxy: { listen_path: '/pets/' },
          global_rate_limit: { rate: 10, per: 1 },
        }),
        policy('gold', { rate: 100, per: 60, access_rights: { pets: {} } }),
        apiDef('petstore-2', { api_id: 'pets2', proxy: { listen_path: '/pets/' } }),
      ]),
    );
    writeFileSync(
      join(d, 'refs.yaml'),
      yamlDocs([
        accessKey('kp', { key_hash: h('kp'), apply_policies: ['silver'] }),
        accessKey('ka2', { key_hash: h('ka2'), access_rights: { ghost: {} } }),
        oauthClient('c2', { api_id: 'pets', client_id: 'cid-2', secretRef: { name: 'client-2', key: 'secret' } }),
        policy('bronze', { rate: 1, per: 1, access_rights: { ghost: {} } }),
        accessKey('kboth', { key_hash: h('kboth'), apply_policies: ['silver'], access_rights: { ghost: {} } }),
        oauthClient('c3', { api_id: 'ghost', client_id: 'cid-3', secretRef: { name: 'client-3', key: 'secret' } }),
      ]),
    );
    writeFileSync(
      join(d, 'keys.yaml'),
      yamlDocs([
        accessKey('dup-a', { key_hash: h('dup-key'), rate: 3, per: 1 }),
        accessKey('dup-b', { key_hash: h('dup-key'), rate: 9, per: 1 }),
        accessKey('edited', {
          key_hash: h('edit-key'),
          rate: 100,
          per: 60,
          is_inactive: true,
          access_rights: { a: { allowed_urls: [{ url: '/only(', methods: ['GET'] }] } },
        }),
        policy('broken', {
          rate: 5,
          per: 1,
          access_rights: { pets: { allowed_urls: [{ url: '(', methods: ['GET'] }] } },
        }),
        secret('rev', { renamed: 'revocable-key' }),
        accessKey('krev', { secretRef: { name: 'rev', key: 'key' }, rate: 100, per: 60 }),
        policy('sleepy', { rate: 5, per: 1, active: false }),
        accessKey('ksleepy', { key_hash: h('ksleepy'), apply_policies: ['sleepy'] }),
      ]),
    );
    const r = await validateJson([d]);
    expect(r.code).toBe(1); // errors: the conflict, the duplicate key, the bad regexes, the Secret without its key
    const ps = r.problems;
    const of = (name: string): Problem[] => ps.filter((p) => p.name === name);
    const one = (name: string, reason: string): Problem => {
      const found = of(name).filter((p) => p.reason === reason);
      expect({ name, reason, n: found.length }).toEqual({ name, reason, n: 1 });
      return found[0]!;
    };
    // the reasons and message parts operator.test.ts waits for in each Ready condition
    expect(one('kp', 'PolicyNotFound')).toMatchObject({ severity: 'warning', field: 'spec.apply_policies' });
    expect(one('kp', 'PolicyNotFound').message).toContain('silver');
    expect(one('kboth', 'PolicyNotFound').message).toBe('policy not found in namespace default: silver');
    expect(one('kboth', 'ApiNotFound').message).toBe('access_rights name API(s) not found in namespace default: ghost');
    expect(one('ka2', 'ApiNotFound')).toMatchObject({ field: 'spec.access_rights', severity: 'warning' });
    expect(one('c3', 'ApiNotFound')).toMatchObject({
      field: 'spec.api_id',
      message: 'API ghost not found in namespace default',
    });
    expect(one('c3', 'SecretNotFound').message).toContain('Secret default/client-3');
    expect(one('c2', 'SecretNotFound')).toMatchObject({ field: 'spec.secretRef', severity: 'warning' });
    // pets takes keys, not bearer tokens: its client could never get one
    expect(one('c2', 'ApiNotOAuth')).toMatchObject({ field: 'spec.api_id', severity: 'warning', rule: 'oauth' });
    expect(one('c2', 'ApiNotOAuth').message).toContain('API pets does not use OAuth 2.0');
    expect(one('bronze', 'ApiNotFound')).toMatchObject({
      field: 'spec.access_rights',
      message: expect.stringContaining('ghost'),
    });
    expect(one('petstore-2', 'InvalidSpec')).toMatchObject({
      severity: 'error',
      field: 'spec.proxy.listen_path',
      rule: 'conflict',
      message: expect.stringContaining('conflicts with ApiDefinition default/petstore'),
    });
    expect(of('petstore')).toEqual([]);
    expect(one('dup-b', 'InvalidSpec')).toMatchObject({
      severity: 'error',
      field: 'spec.key_hash',
      rule: 'duplicate-key',
    });
    expect(one('dup-b', 'InvalidSpec').message).toContain('dup-a');
    expect(of('dup-a')).toEqual([]);
    expect(one('edited', 'InvalidSpec')).toMatchObject({
      severity: 'error',
      field: 'spec.access_rights.a.allowed_urls.0.url',
    });
    expect(one('broken', 'InvalidSpec')).toMatchObject({
      severity: 'error',
      field: 'spec.access_rights.pets.allowed_urls.0.url',
    });
    expect(one('krev', 'SecretNotFound')).toMatchObject({ severity: 'error', field: 'spec.secretRef.key' });
    expect(one('krev', 'SecretNotFound').message).toContain('has no key');
    expect(one('ksleepy', 'PolicyInactive').message).toBe(
      'policy inactive in namespace default (active: false; the key is refused): sleepy',
    );
    expect(of('gold')).toEqual([]);

    // --strict: the references to what the input lacks become errors; what is wrong stays wrong
    const strict = problemsOf(await gw(['validate', '--strict', '--output', 'json', d]));
    expect(strict.find((p) => p.name === 'kp')?.severity).toBe('error');
    expect(
      strict
        .filter((p) => p.severity === 'warning')
        .map((p) => p.reason)
        .sort(),
    ).toEqual(['ApiNotOAuth', 'PolicyInactive']);
  });

  test("the standalone suites' bad files: YAML, an alias bomb, nested 100,000 levels, over 1 MiB, two APIs on one path, a Secret without the key", async () => {
    const d = subdir('standalone');
    // test/integration/standalone.test.ts's bad.yaml and broken option file, standalone-dir.test.ts's files
    writeFileSync(join(d, 'bad.yaml'), apiYaml('bad', '/bad/', 'http://127.0.0.1:1', { rate: -1 }));
    writeFileSync(join(d, 'good.yaml'), apiYaml('good', '/good/', 'http://127.0.0.1:1'));
    writeRefusedManifests(d, 'http://127.0.0.1:1');
    writeFileSync(join(d, 'broken.yaml'), 'enable_kv_rolling_limiter: [\n');
    const r = await validateJson([d]);
    expect(r.code).toBe(1);
    const ps = r.problems;
    const at = (file: string): Problem[] => ps.filter((p) => p.file === join(d, file));
    expect(at('bad.yaml')).toEqual([expect.objectContaining({ field: 'spec.global_rate_limit.rate', rule: 'schema' })]);
    expect(at('bomb.yaml')).toEqual([
      expect.objectContaining({ rule: 'yaml', message: expect.stringContaining('Excessive alias count') }),
    ]);
    expect(at('deep.yaml')).toEqual([
      expect.objectContaining({
        rule: 'yaml',
        field: '(file)',
        message: 'invalid YAML: nested deeper than 66 levels (document 0, line 5, column 76): not parsed',
      }),
    ]);
    expect(at('broken.yaml')).toEqual([
      expect.objectContaining({ rule: 'yaml', message: expect.stringContaining('invalid YAML') }),
    ]);
    expect(at('huge.yaml')).toEqual([
      expect.objectContaining({ rule: 'file', field: '(file)', message: expect.stringContaining('1048576 bytes') }),
    ]);
    // the same ApiDefinition in two files: one error, as standalone refuses the second (same api_id),
    // saying a cluster's kubectl apply would replace the first instead
    expect(at('twin-b.yaml').map((p) => `${p.severity} ${p.rule} ${p.field}`)).toEqual([
      'error conflict metadata.name',
    ]);
    expect(at('twin-b.yaml')[0]!.message).toMatch(/gw standalone keeps the first and refuses this one; kubectl apply/);
    expect(at('path-b.yaml')).toEqual([
      expect.objectContaining({
        rule: 'conflict',
        field: 'spec.proxy.listen_path',
        message: expect.stringContaining('path-a.yaml'),
      }),
    ]);
    expect(at('keys.yaml')).toEqual([
      expect.objectContaining({
        name: 'wrongkey',
        severity: 'error',
        reason: 'SecretNotFound',
        message: 'Secret default/otherkey has no key "key"',
      }),
    ]); // `generated`'s Secret does not exist: the controller and standalone generate it
    expect(at('good.yaml')).toEqual([]);
    expect(at('keyed.yaml')).toEqual([]);
  });

  test('a UTF-16 manifest (a file, stdin) is one error naming it and its encoding, rule file; a UTF-8 byte-order mark is read past', async () => {
    const d = subdir('utf16');
    const text = yamlDocs([policy('p16', { rate: 1, per: 1 })]);
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
    writeFileSync(join(d, 'windows.yaml'), utf16);
    writeFileSync(
      join(d, 'bom.yaml'),
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text.replace('p16', 'p8'))]),
    );
    const message =
      'not UTF-8: encoded as UTF-16LE (a byte-order mark); gw reads manifests as UTF-8 (save it as UTF-8)';
    const r = await validateJson([d]);
    expect({ code: r.code, problems: r.problems }).toEqual({
      code: 1,
      problems: [{ severity: 'error', file: join(d, 'windows.yaml'), field: '(file)', rule: 'file', message }],
    });
    const s = await validateJson(['-'], utf16);
    expect({ code: s.code, problems: s.problems }).toEqual({
      code: 1,
      problems: [{ severity: 'error', file: '-', field: '(file)', rule: 'file', message }],
    });
  });

  test('stdin has the bound a file has: past 1 MiB it is one error naming - (too large), read no further; at the bound it is read', async () => {
    const limit = 1024 * 1024;
    // a YAML comment line: valid text of any length, no document in it
    const comment = (size: number): string => `#${'x'.repeat(size - 2)}\n`;
    const over = await validateJson(['-'], comment(8 * limit));
    expect({ code: over.code, problems: over.problems }).toEqual({
      code: 1,
      problems: [
        {
          severity: 'error',
          file: '-',
          field: '(file)',
          rule: 'file',
          message: `too large: more than ${limit} bytes, over the limit of ${limit} bytes per manifest file (split it into several files)`,
        },
      ],
    });
    const edge = await validateJson(['-'], comment(limit + 1));
    expect(edge.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^too large/)]);
    const at = await gw(['validate', '-f', '-'], comment(limit));
    expect({ code: at.code, stdout: at.stdout }).toEqual({ code: 1, stdout: '' });
    expect(at.stderr).toMatch(/no documents in the input/);
  });

  test('every path printed is escaped: a command-line path with ESC and a newline, a file name that is not UTF-8', async () => {
    const forged = join(dir, 'no\x1b[31mpe\nerror x.yaml');
    const r = await gw(['validate', forged]);
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 2, stdout: '' });
    expect(r.stderr).toBe(
      `gw validate: ${join(dir, 'no\\u{1b}[31mpe\\u{a}error x.yaml')}: no such file or directory\n`,
    );
    const d = subdir('not-utf8-name');
    writeFileSync(Buffer.from(`${d}/b\xffad.yaml`, 'latin1'), yamlDocs([policy('p', { rate: 1, per: 1 })]));
    const t = await gw(['validate', d]);
    expect({ code: t.code, stdout: t.stdout }).toEqual({
      code: 1,
      stdout: `error ${join(d, 'b\\u{fffd}ad.yaml')} (file): skipped: its name is not valid UTF-8 (rename it) (file)\n`,
    });
    const j = await validateJson([d]);
    expect(j.problems.map((p) => p.file)).toEqual([join(d, 'b\uFFFDad.yaml')]);
  });

  test('an invalid metadata.namespace (not a DNS-1123 label) is refused naming the file and field, the Secret data not printed; standalone loads the good ones', async () => {
    const d = subdir('bad-namespace');
    const bad = {
      ...secret('s', { key: 'hunter2-value' }),
      metadata: { name: 's', namespace: 'SUPERSECRET-8 bad ns' },
    };
    const good = policy('p', { rate: 1, per: 1 });
    const file = join(d, 'ns.yaml');
    writeFileSync(file, yamlDocs([bad, good]));
    const r = await gw(['validate', file]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^error \S*ns\.yaml\[0\] Secret .* metadata\.namespace: must be a DNS-1123 label/);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).not.toMatch(/hunter2-value/);
    // what gw standalone reads a directory's file with: the bad document refused, the good one loaded
    const into: LoadResult = { resources: [], errors: [], files: [] };
    loadManifestText(readFileSync(file, 'utf8'), 'ns.yaml', into);
    expect(into.resources.map((x) => `${x.resource.kind}/${x.resource.metadata.name}`)).toEqual(['Policy/p']);
    expect(into.errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/^metadata\.namespace: must be a DNS-1123 label/),
    ]);
    expect(JSON.stringify(into.errors)).not.toMatch(/hunter2-value/);
  });

  test('a YAML 1.1 boolean (active: off) is read as kubectl reads it: a warning naming the field, exit 0; in a string field, the schema error kubectl would get', async () => {
    const text =
      'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: sleepy}\nspec: {rate: 1, per: 1, active: off}\n';
    const r = await validateJson(['-'], text);
    expect({ code: r.code, problems: r.problems }).toEqual({
      code: 0,
      problems: [
        {
          severity: 'warning',
          file: '-',
          document: 0,
          kind: 'Policy',
          namespace: 'default',
          name: 'sleepy',
          field: 'spec.active',
          rule: 'yaml',
          message:
            'off is read as false, as kubectl reads YAML (1.1; YAML 1.2 reads the string "off"): write false for the boolean, or quote it ("off") for the string',
        },
      ],
    });
    const named = await validateJson(['-'], text.replace('{name: sleepy}', '{name: no}'));
    expect(named.code).toBe(1);
    expect(named.problems.map((p) => `${p.severity} ${p.rule} ${p.field}`)).toEqual([
      'error schema metadata.name',
      'warning yaml metadata.name',
      'warning yaml spec.active',
    ]);
  });

  test('a reference to an ApiDefinition or Policy the schema refused is an error naming that document, not "not found"', async () => {
    const text = yamlDocs([
      apiDef('broken-api', {
        api_id: 'shop',
        proxy: { listen_path: '/shop/' },
        global_rate_limit: { rate: -1, per: 1 },
      }),
      policy('broken-pol', { rate: -1, per: 1 }),
      policy('uses-shop', { rate: 1, per: 1, access_rights: { shop: {}, ghost: {} } }),
      accessKey('k', {
        key_hash: sha256hex('refused-refs'),
        apply_policies: ['broken-pol'],
        access_rights: { shop: {} },
      }),
      oauthClient('c', { api_id: 'shop', client_id: 'cid', secretRef: { name: 'c-secret', key: 'secret' } }),
    ]);
    const r = await validateJson(['-'], text);
    expect(r.code).toBe(1);
    const ps = r.problems.filter((p) => p.rule === 'reference');
    const refusedApi =
      'API shop of namespace default is refused: ApiDefinition default/broken-api (-[0]) does not pass its schema (its own error says why)';
    expect(ps.map((p) => [p.severity, p.name, p.field, p.reason, p.message])).toEqual([
      ['error', 'uses-shop', 'spec.access_rights', 'ApiNotFound', refusedApi],
      // the API the input does not have at all stays a warning
      [
        'warning',
        'uses-shop',
        'spec.access_rights',
        'ApiNotFound',
        'access_rights name API(s) not found in namespace default: ghost',
      ],
      [
        'error',
        'k',
        'spec.apply_policies',
        'PolicyNotFound',
        'policy broken-pol of namespace default is refused: Policy default/broken-pol (-[1]) does not pass its schema (its own error says why)',
      ],
      ['error', 'k', 'spec.access_rights', 'ApiNotFound', refusedApi],
      ['error', 'c', 'spec.api_id', 'ApiNotFound', refusedApi],
    ]);
  });

  test("a compile error (an OAS middleware entry naming no operation) names compileApi's field", async () => {
    const doc = apiDef('oas', {
      oas: {
        openapi: '3.0.3',
        paths: { '/x': { get: { operationId: 'x' } } },
        'x-gw-api-gateway': {
          server: { listenPath: { value: '/o/' } },
          middleware: { operations: { nope: { rateLimit: { enabled: true, rate: 1, per: '1s' } } } },
        },
      },
    });
    const r = await validateJson(['-'], yamlDocs([doc]));
    expect(r.code).toBe(1);
    expect(r.problems).toEqual([
      expect.objectContaining({
        rule: 'compile',
        reason: 'InvalidSpec',
        field: 'spec.oas.x-gw-api-gateway.middleware.operations.nope',
        message: 'no operation in spec.oas.paths has operationId "nope"',
      }),
    ]);
  });

  test('one listen path in two namespaces: valid for a cluster (namespaces apart), a warning for gw standalone', async () => {
    const a = apiDef('one', { proxy: { listen_path: '/same/' } });
    const b = { ...apiDef('two', { proxy: { listen_path: '/same/' } }), metadata: { name: 'two', namespace: 'other' } };
    const r = await validateJson(['-'], yamlDocs([a, b]));
    expect(r.code).toBe(0);
    expect(r.problems).toEqual([
      expect.objectContaining({
        severity: 'warning',
        name: 'two',
        rule: 'standalone-conflict',
        field: 'spec.proxy.listen_path',
      }),
    ]);
  });

  test('a directory of 10,000 manifests: every one read and checked, the one bad document found', async () => {
    const d = subdir('many');
    writeManyManifests(d, 10_000, { badKeyAt: 5002 });
    const r = await validateJson([d]);
    expect(r.stderr).toBe('gw validate: 10000 file(s), 10000 document(s): 1 error(s), 0 warning(s)\n');
    expect(r.problems).toEqual([
      expect.objectContaining({ file: join(d, 'm-05002.yaml'), name: 'key-5002', field: 'spec.rate', rule: 'schema' }),
    ]);
    expect(r.code).toBe(1);
  }, 180_000); // time is not asserted (docs/standalone.md has the figure); a loaded machine writes 10,000 files slowly

  test('an empty input (stdin, a file, a directory) is exit 1 with a line saying no documents', async () => {
    const emptyDir = join(dir, 'empty-dir');
    mkdirSync(emptyDir, { recursive: true });
    const emptyFile = join(dir, 'empty.yaml');
    writeFileSync(emptyFile, '');
    for (const [args, stdin] of [
      [['validate', '-f', '-'], ''],
      [['validate', emptyFile], undefined],
      [['validate', emptyDir], undefined],
    ] as const) {
      const r = await gw([...args], stdin);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 1, stdout: '' });
      expect(r.stderr).toMatch(/0 document\(s\).*\ngw validate: no documents in the input: nothing was checked\n$/);
    }
  });

  test('a file named twice, or a directory and a file inside it, is read once: valid input stays exit 0', async () => {
    const one = join(dir, 'once.yaml');
    writeFileSync(one, yamlDocs([apiDef('once', { proxy: { listen_path: '/once/' } })]));
    const file = join(
      'examples',
      readdirSync('examples').find((f) => /\.ya?ml$/.test(f))!,
    );
    for (const args of [
      ['validate', one, '-f', one],
      ['validate', one, join(dir, '.', 'once.yaml')],
      ['validate', 'examples', file],
      ['validate', file, 'examples', 'examples'],
    ]) {
      const r = await gw(args);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 0, stdout: '' });
    }
  });

  test('exit codes: 0 valid (warnings allowed), 1 errors, 2 usage — no path, an unknown flag, a bad --output, a missing path', async () => {
    const warnOnly = yamlDocs([accessKey('k', { key_hash: sha256hex('w'), apply_policies: ['elsewhere'] })]);
    expect((await gw(['validate', '-'], warnOnly)).code).toBe(0);
    expect((await gw(['validate', '--strict', '-'], warnOnly)).code).toBe(1);
    const text = await gw(['validate', '-'], warnOnly);
    expect(text.stdout).toBe(
      'warning -[0] AccessKey default/k spec.apply_policies: policy not found in namespace default: elsewhere (reference, PolicyNotFound)\n',
    );
    for (const [args, pattern] of [
      [['validate'], /^gw validate: name the manifests to check/],
      [['validate', '--bogus', 'examples'], /^gw validate: unknown option '--bogus'/],
      [
        ['validate', '--output', 'xml', 'examples'],
        /^gw validate: option '--output <format>' argument 'xml' is invalid/,
      ],
      [['validate', join(dir, 'no-such-dir')], /^gw validate: .*no-such-dir: no such file or directory\n$/],
      [['validate', '-', '-f', '-'], /^gw validate: stdin \(-\) named twice\n$/],
    ] as const) {
      const r = await gw([...args]);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(pattern);
    }
  });
});

describe('gw version', () => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  /** What `make build` wrote from `git rev-parse HEAD` (absent: built without a checkout). */
  const commit = ((): string | undefined => {
    try {
      return (JSON.parse(readFileSync('dist/build-info.json', 'utf8')) as { commit?: string }).commit;
    } catch {
      return undefined;
    }
  })();

  test('gw version and gw --version: package version, Node.js version, the commit of the build', async () => {
    const want = { version: pkg.version, node: process.version, ...(commit ? { commit } : {}) };
    const json = await gw(['version', '--output', 'json']);
    expect({ code: json.code, body: json.json }).toEqual({ code: 0, body: want });
    const text = `gw ${pkg.version}\nnode ${process.version}\ncommit ${commit ?? 'unknown (not built from a git checkout)'}\n`;
    expect((await gw(['version'])).stdout).toBe(text);
    const v = await gw(['--version']);
    expect({ code: v.code, stdout: v.stdout }).toEqual({ code: 0, stdout: text });
    expect(buildInfo()).toEqual(want);
  });

  test("a running gw's /healthz names its build and /metrics has gw_build_info", async () => {
    const d = tempDir('gw-version-');
    writeFileSync(join(d, 'api.yaml'), stringify(apiDef('v', { use_keyless: true, proxy: { listen_path: '/v/' } })));
    const s = await startStandalone(d);
    try {
      const h = await request(`${s.admin}/healthz`);
      expect(await h.body.json()).toMatchObject({ status: 'ok', build: buildInfo() });
      const m = await (await request(`${s.admin}/metrics`)).body.text();
      const b = buildInfo();
      expect(m).toContain(`gw_build_info{version="${b.version}",node="${b.node}",commit="${b.commit ?? 'unknown'}"} 1`);
      // the gateway's public listener does not say which version runs
      const g = await request(`${s.gateway}/healthz`);
      expect(await g.body.json()).not.toHaveProperty('build');
    } finally {
      await s.stop();
      cleanup(d);
    }
  });
});
