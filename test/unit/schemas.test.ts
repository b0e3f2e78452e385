import { ApiDefinitionResource, AccessKeyResource, PolicyResource } from '../../crds/kinds.js';
import { generatedFiles } from '../../crds/generate.js';

const api = (spec: unknown) => ({ apiVersion: 'gw.io/v1alpha1', kind: 'ApiDefinition', metadata: { name: 'a' }, spec });

describe('resource schemas', () => {
  test('a classic ApiDefinition gets its defaults', () => {
    const r = ApiDefinitionResource.parse(
      api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 5, per: 1 } }),
    );
    expect(r.metadata.namespace).toBe('default');
    expect(r.spec.active).toBe(true);
    expect(r.spec.use_keyless).toBe(false);
    expect(r.spec.proxy?.strip_listen_path).toBe(true);
  });

  test.each([
    [
      'negative rate',
      { proxy: { listen_path: '/a/' }, global_rate_limit: { rate: -1, per: 1 } },
      'global_rate_limit.rate',
    ],
    [
      'wrong type',
      { proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 'ten', per: 1 } },
      'global_rate_limit.rate',
    ],
    ['missing listen path', { global_rate_limit: { rate: 1, per: 1 } }, 'proxy.listen_path'],
    ['unknown field', { proxy: { listen_path: '/a/' }, bogus: 1 }, 'bogus'],
  ])('refuses %s and names the field', (_name, spec, field) => {
    const r = ApiDefinitionResource.safeParse(api(spec));
    expect(r.success).toBe(false);
    const paths = r.error!.issues.map((i) => [...i.path, ...((i as { keys?: string[] }).keys ?? [])].join('.'));
    expect(paths.some((p) => p.includes(field))).toBe(true);
  });

  test('target_url: a scheme gw cannot proxy is refused, naming the field', () => {
    const api = (target_url: string) =>
      ApiDefinitionResource.safeParse({
        apiVersion: 'gw.io/v1alpha1',
        kind: 'ApiDefinition',
        metadata: { name: 'a' },
        spec: { name: 'a', proxy: { listen_path: '/a/', target_url } },
      });
    for (const bad of ['ftp://x', 'file:///etc/passwd', 'ws://x']) {
      const r = api(bad);
      expect(r.success).toBe(false);
      expect(JSON.stringify(r.error?.issues)).toMatch(/target_url.*must be an http:\/\/, https:\/\/ or h2c:\/\/ URL/);
    }
    for (const good of ['http://x', 'https://x:8443/base', 'h2c://x:50051']) expect(api(good).success).toBe(true);
  });

  test("the OAS form's upstream.url: the same schemes, refused naming the field", () => {
    const oas = (url: string) =>
      ApiDefinitionResource.safeParse(
        api({
          oas: {
            openapi: '3.0.3',
            info: { title: 'o', version: '1' },
            paths: {},
            'x-gw-api-gateway': { info: { id: 'o' }, server: { listenPath: { value: '/o/' } }, upstream: { url } },
          },
        }),
      );
    const bad = oas('ftp://x');
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toMatch(
      /"upstream","url".*must be an http:\/\/, https:\/\/ or h2c:\/\/ URL/,
    );
    expect(oas('https://x').success).toBe(true);
  });

  test('proxy.transport: a client certificate without its key (or the key alone) is refused, naming the field', () => {
    const transport = (t: object) =>
      ApiDefinitionResource.safeParse(api({ proxy: { listen_path: '/a/', target_url: 'https://x', transport: t } }));
    for (const t of [{ ssl_cert_file: '/c.pem' }, { ssl_key_file: '/k.pem' }]) {
      const r = transport(t);
      expect(r.success).toBe(false);
      expect(JSON.stringify(r.error?.issues)).toMatch(/ssl_key_file.*ssl_cert_file and ssl_key_file go together/);
    }
    expect(transport({ ssl_cert_file: '/c.pem', ssl_key_file: '/k.pem' }).success).toBe(true);
    expect(transport({ ssl_ca_cert_file: '/ca.pem' }).success).toBe(true);
  });

  test('an AccessKey needs exactly one of secretRef and key_hash', () => {
    const base = { apiVersion: 'gw.io/v1alpha1', kind: 'AccessKey', metadata: { name: 'k' } };
    expect(AccessKeyResource.safeParse({ ...base, spec: { rate: 1, per: 1 } }).success).toBe(false);
    expect(AccessKeyResource.safeParse({ ...base, spec: { key_hash: 'a'.repeat(64) } }).success).toBe(true);
    expect(
      AccessKeyResource.safeParse({ ...base, spec: { key_hash: 'a'.repeat(64), secretRef: { name: 's' } } }).success,
    ).toBe(false);
  });

  test('a Policy refuses an unknown smoothing field', () => {
    const r = PolicyResource.safeParse({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'Policy',
      metadata: { name: 'p' },
      spec: { rate: 1, per: 1, smoothing: { enabled: true, threshold: 1, step: 1, nope: 1 } },
    });
    expect(r.success).toBe(false);
  });

  test('generated CRDs carry the schema rules (minimum, CEL rule, printer columns)', () => {
    const files = generatedFiles();
    const apidef = files.get('apidefinitions.gw.io.yaml')!;
    expect(apidef).toContain('minimum: 0');
    expect(apidef).toContain('has(self.oas) || (has(self.proxy) && has(self.proxy.listen_path))');
    expect(apidef).toContain('jsonPath: .status.listenPath'); // compiled by the controller: the same for both forms
    expect(files.get('accesskeys.gw.io.yaml')).toContain('has(self.secretRef) != has(self.key_hash)');
  });
});
