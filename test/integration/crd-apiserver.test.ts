/**
 * The API server and the code validate with the same rules: a table of bad inputs is refused by both
 * the zod schemas and the real kube-apiserver (with the generated CRDs), and good inputs by neither.
 * Every example manifest applies and reads back.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { validateDocument } from '../../lib/manifests.js';
import { freshNamespace, kubectl } from '../helpers/kube.js';

const api = (spec: unknown, name = 'a') => ({ apiVersion: 'gw.io/v1alpha1', kind: 'ApiDefinition', metadata: { name }, spec });
const key = (spec: unknown, name = 'k') => ({ apiVersion: 'gw.io/v1alpha1', kind: 'AccessKey', metadata: { name }, spec });
const pol = (spec: unknown, name = 'p') => ({ apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name }, spec });

const HASH = 'a'.repeat(64);
const bad: [string, Record<string, unknown>][] = [
  ['wrong type: rate as a string', api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 'ten', per: 1 } })],
  ['negative rate', api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: -1, per: 1 } })],
  ['negative per', pol({ rate: 1, per: -5 })],
  ['missing listen path', api({ global_rate_limit: { rate: 1, per: 1 } })],
  ['listen path not starting with /', api({ proxy: { listen_path: 'a/' } })],
  ['unknown field', api({ proxy: { listen_path: '/a/' }, rate_limitz: 1 })],
  ['smoothing without threshold', key({ key_hash: HASH, smoothing: { enabled: true, step: 1 } })],
  ['key_hash not hex', key({ key_hash: 'xyz' })],
  ['neither secretRef nor key_hash', key({ rate: 1, per: 1 })],
  ['both secretRef and key_hash', key({ key_hash: HASH, secretRef: { name: 's' } })],
  ['OAS per not a duration', api({ oas: { openapi: '3.0.3', paths: {}, 'x-gw-api-gateway': { server: { listenPath: { value: '/o/' } }, upstream: { rateLimit: { enabled: true, rate: 1, per: 'ten' } } } } })],
  ['OAS version 3.1', api({ oas: { openapi: '3.1.0', paths: {}, 'x-gw-api-gateway': { server: { listenPath: { value: '/o/' } } } } })],
  ['throttle_retry_limit not an integer', key({ key_hash: HASH, throttle_retry_limit: 1.5 })],
  ['tags not an array', key({ key_hash: HASH, tags: 'a,b' })],
];
const good: [string, Record<string, unknown>][] = [
  ['classic API', api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 0, per: 0 } })],
  ['OAS API', api({ oas: { openapi: '3.0.3', paths: { '/x': { get: { operationId: 'x' } } }, 'x-gw-api-gateway': { server: { listenPath: { value: '/o/' } }, middleware: { operations: { x: { rateLimit: { enabled: true, rate: 1, per: '10s' } } } } } } })],
  ['key with every kind of field', key({ key_hash: HASH, rate: 1, per: 1, meta_data: { a: 1 }, access_rights: { a: { api_id: 'a', limit: { rate: 1, per: 1 } } }, smoothing: { enabled: true, threshold: 1, step: 1 } })],
];

describe('zod and the real kube-apiserver agree', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await freshNamespace('crd');
  });

  test.each(bad)('both refuse: %s', async (_name, doc) => {
    expect(validateDocument(doc).ok).toBe(false);
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));
    expect(r.code).not.toBe(0);
    expect(r.stderr.length).toBeGreaterThan(0);
  });

  test.each(good)('both accept: %s', async (_name, doc) => {
    const v = validateDocument(doc);
    expect(v.ok ? 'ok' : v.message).toBe('ok');
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  test('every example manifest applies to the API server and reads back', async () => {
    const dir = 'examples';
    for (const file of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f))) {
      const docs = parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
      const r = await kubectl(['apply', '-n', ns, '-f', join(dir, file)]);
      expect(`${file}: ${r.stderr}`).toBe(`${file}: `);
      for (const d of docs) {
        const got = await kubectl(['get', d.kind.toLowerCase(), d.metadata.name, '-n', ns, '-o', 'json']);
        expect(got.code).toBe(0);
        expect((JSON.parse(got.stdout) as { metadata: { name: string } }).metadata.name).toBe(d.metadata.name);
      }
    }
    const list = await kubectl(['get', 'apidefinitions', '-n', ns]);
    expect(list.stdout).toMatch(/NAME\s+LISTEN\s+RATE\s+PER\s+READY/);
    expect(list.stdout).toMatch(/echo\s+\/echo\/\s+3\s+10/);
  });
});
