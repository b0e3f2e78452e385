/**
 * The chart offline: CRDs in sync with the repo, `helm lint --strict`, `helm template` (default and
 * non-default values) through `kubeconform -strict` with schemas prepared offline (built-in kinds from
 * the real kube-apiserver's /openapi/v2, gw's kinds from the chart's CRDs), the examples/ against the
 * CRD schemas, and values.schema.json refusing bad values.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { GatewayOptions } from '../../../lib/options.js';
import { CONFIG_MAP_NAME } from '../../../contract/config-schema.js';
import { helm, kubeconform, run, writeApiServerSchemas, writeCrdSchemas } from '../../helpers/chart-tools.js';
import { defaultInjectOptions, sidecarContainer } from '../../../webhook/inject.js';
import { injectOptionsFromFlags } from '../../../cli/webhook.js';

const CHART = resolve('helm/gw');
const NONDEFAULT = resolve('test/integration/helm/fixtures/values-nondefault.yaml');
const STUB_CRDS = resolve('test/integration/helm/fixtures/crds');
let schemas: string;
let work: string;

type Doc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };
const docs = (text: string): Doc[] => parseAllDocuments(text).map((d) => d.toJS() as Doc).filter(Boolean);
const find = (all: Doc[], kind: string, name: string): Doc => {
  const d = all.find((x) => x.kind === kind && x.metadata.name === name);
  if (!d) throw new Error(`${kind}/${name} not rendered (have: ${all.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')})`);
  return d;
};

async function template(extra: string[] = []): Promise<string> {
  const r = await helm(['template', 'gw', CHART, '--namespace', 'gw-system', ...extra]);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return r.stdout;
}

beforeAll(async () => {
  const server = process.env.GW_TEST_KUBE_SERVER;
  const token = process.env.GW_TEST_KUBE_TOKEN;
  if (!server || !token) throw new Error('GW_TEST_KUBE_SERVER/TOKEN unset: run through jest globalSetup');
  schemas = mkdtempSync(join(tmpdir(), 'gw-kubeconform-'));
  work = mkdtempSync(join(tmpdir(), 'gw-chart-'));
  const n = await writeApiServerSchemas(server, token, schemas);
  expect(n).toBeGreaterThan(50);
  expect(writeCrdSchemas(join(CHART, 'crds'), schemas)).toHaveLength(4);
  expect(writeCrdSchemas(STUB_CRDS, schemas)).toHaveLength(5);
}, 60_000);

afterAll(() => {
  rmSync(schemas, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

describe('CRDs', () => {
  test("the chart's crds/ is an exact copy of the repo's generated crds/*.yaml (run `cp crds/*.yaml helm/gw/crds/`)", () => {
    const repo = readdirSync('crds').filter((f) => f.endsWith('.yaml')).sort();
    const chart = readdirSync(join(CHART, 'crds')).sort();
    expect(chart).toEqual(repo);
    for (const f of repo) expect(readFileSync(join(CHART, 'crds', f), 'utf8')).toBe(readFileSync(join('crds', f), 'utf8'));
  });
});

describe('helm lint --strict', () => {
  test.each([
    ['default values', [] as string[]],
    ['non-default values', ['-f', NONDEFAULT]],
  ])('%s', async (_n, extra) => {
    const r = await helm(['lint', '--strict', CHART, ...extra]);
    expect(r.stderr + r.stdout).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    expect(r.code).toBe(0);
  });
});

describe('helm template | kubeconform -strict (offline schemas)', () => {
  test('kubeconform is not vacuous: an unknown field, a wrong type and an unknown kind fail', async () => {
    const bad = [
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: 1, selector: {}, template: {spec: {containers: [{name: a, image: b, imagePullPolcy: Always}]}}}',
      'apiVersion: v1\nkind: Service\nmetadata: {name: y}\nspec: {ports: [{port: "eighty"}]}',
      'apiVersion: gw.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rate: "many"}',
      'apiVersion: example.com/v1\nkind: Nothing\nmetadata: {name: z}',
    ].join('\n---\n');
    const s = await kubeconform(bad, schemas);
    expect(s.valid).toBe(0);
    expect(s.invalid + s.errors).toBe(4);
    expect(s.messages.join('\n')).toMatch(/imagePullPolcy/);
  });

  test('default values: every rendered object (CRDs included) is valid', async () => {
    const text = await template(['--include-crds']);
    const s = await kubeconform(text, schemas);
    expect(s.messages).toEqual([]);
    expect({ invalid: s.invalid, errors: s.errors, skipped: s.skipped }).toEqual({ invalid: 0, errors: 0, skipped: 0 });
    expect(s.valid).toBe(docs(text).length);
    expect(s.valid).toBeGreaterThanOrEqual(26);
  });

  test('non-default values (bundled Redis, cert-manager, ServiceMonitor, one watched namespace, sidecar namespaces): valid', async () => {
    const text = await template(['-f', NONDEFAULT]);
    const s = await kubeconform(text, schemas);
    expect(s.messages).toEqual([]);
    expect({ invalid: s.invalid, errors: s.errors, skipped: s.skipped }).toEqual({ invalid: 0, errors: 0, skipped: 0 });
    const kinds = new Set(docs(text).map((d) => d.kind));
    for (const k of ['ServiceMonitor', 'PodMonitor', 'PrometheusRule', 'Certificate', 'Issuer', 'MutatingWebhookConfiguration', 'PodDisruptionBudget']) expect(kinds).toContain(k);
    expect(s.valid).toBe(docs(text).length);
  });

  test("examples/ (the tour) are valid against the chart's CRD schemas", async () => {
    const text = readdirSync('examples').filter((f) => f.endsWith('.yaml')).sort().map((f) => readFileSync(join('examples', f), 'utf8')).join('\n---\n');
    const s = await kubeconform(text, schemas);
    expect(s.messages).toEqual([]);
    const kinds = docs(text).map((d) => d.kind);
    for (const k of ['ApiDefinition', 'Policy', 'AccessKey', 'OAuthClient', 'Secret']) expect(kinds).toContain(k);
    expect(kinds.filter((k) => k === 'Policy').length).toBeGreaterThanOrEqual(2);
    expect(s.valid).toBe(kinds.length);
  });
});

describe('what the chart renders', () => {
  test('controller: 2 replicas, --leader-elect, probes on /healthz and /readyz of --metrics-listen, resources, non-root read-only', async () => {
    const all = docs(await template());
    const d = find(all, 'Deployment', 'gw-controller') as Doc & { spec: { replicas: number; template: { spec: { securityContext: Record<string, unknown>; containers: Record<string, unknown>[] } } } };
    expect(d.spec.replicas).toBe(2);
    const c = d.spec.template.spec.containers[0]!;
    expect(c.args).toEqual(['controller', '--leader-elect', '--lease-namespace=gw-system', '--metrics-listen=0.0.0.0:9090']);
    expect(c.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'metrics' } });
    expect(c.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'metrics' } });
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(c.resources).toMatchObject({ requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } });
    expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(d.spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001 });
    expect(find(all, 'PodDisruptionBudget', 'gw-controller')).toMatchObject({ spec: { minAvailable: 1 } });
  });

  test("V8 heap flags agree with the memory limits: the controller's NODE_OPTIONS, the sidecar's through the webhook", async () => {
    type C = { args: string[]; env?: { name: string; value?: string }[] };
    const container = (all: Doc[], name: string): C => (find(all, 'Deployment', name) as unknown as { spec: { template: { spec: { containers: C[] } } } }).spec.template.spec.containers[0]!;
    const nodeOptions = (c: C): string | undefined => c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
    const byDefault = docs(await template());
    expect(nodeOptions(container(byDefault, 'gw-controller'))).toBe('--max-semi-space-size=2 --max-old-space-size=307');
    const hook = container(byDefault, 'gw-webhook');
    expect(hook.args).toContain('--sidecar-memory-limit=256Mi');
    expect(hook.args.some((a) => a.startsWith('--sidecar-node-options'))).toBe(false);
    // what the webhook then injects for that limit
    const flags = { listen: '0.0.0.0:8443', tlsCert: 'c', tlsKey: 'k', image: 'gw', imagePullPolicy: 'IfNotPresent', sidecarListenPort: '15080', sidecarMetricsPort: '15090', redisSecret: '', sidecarCpuRequest: '50m', sidecarMemoryRequest: '128Mi', sidecarMemoryLimit: '256Mi', sidecarDrainDelay: '5', runAsUser: '10001' };
    const injected = sidecarContainer(injectOptionsFromFlags(flags), { upstreamPort: 8080, listenPort: 15080, metricsPort: 15090, group: 'g', portName: 'http', config: false }) as C;
    expect(nodeOptions(injected)).toBe('--expose-gc --max-semi-space-size=8 --v8-pool-size=2 --max-old-space-size=153');

    const changed = docs(await template(['--set', 'controller.resources.limits.memory=1Gi', '--set', 'sidecar.nodeOptions=--max-old-space-size=100']));
    expect(nodeOptions(container(changed, 'gw-controller'))).toBe('--max-semi-space-size=2 --max-old-space-size=614');
    expect(container(changed, 'gw-webhook').args).toContain('--sidecar-node-options=--max-old-space-size=100');
    const given = docs(await template(['--set', 'controller.nodeOptions=--max-old-space-size=200']));
    expect(nodeOptions(container(given, 'gw-controller'))).toBe('--max-old-space-size=200');
  });

  test('TLS and h2c per pod: sidecar.tls and sidecar.h2c become the webhook\'s defaults, which it injects as a read-only Secret volume and listener flags', async () => {
    type C = { args: string[] };
    const webhookArgs = async (extra: string[]): Promise<string[]> =>
      (find(docs(await template(extra)), 'Deployment', 'gw-webhook') as unknown as { spec: { template: { spec: { containers: C[] } } } }).spec.template.spec.containers[0]!.args;
    const byDefault = await webhookArgs([]);
    expect(byDefault.filter((a) => a.startsWith('--sidecar-tls') || a.startsWith('--sidecar-h2c'))).toEqual([]);
    const on = await webhookArgs(['--set', 'sidecar.tls.secretName=shop-tls', '--set', 'sidecar.tls.clientCA=true', '--set', 'sidecar.tls.minVersion=TLSv1.3', '--set', 'sidecar.h2c=false']);
    const flagsOf = on.filter((a) => a.startsWith('--sidecar-tls') || a.startsWith('--sidecar-h2c'));
    expect(flagsOf).toEqual(['--sidecar-tls-secret=shop-tls', '--sidecar-tls-client-ca=true', '--sidecar-tls-min-version=TLSv1.3', '--sidecar-h2c=false']);
    expect((await webhookArgs(['--set', 'sidecar.h2c=true'])).filter((a) => a.startsWith('--sidecar-h2c'))).toEqual(['--sidecar-h2c=true']);
    // the rendered flags, read by the webhook's own flag parser, and what it injects with them
    const flags = { listen: '0.0.0.0:8443', tlsCert: 'c', tlsKey: 'k', image: 'gw', imagePullPolicy: 'IfNotPresent', sidecarListenPort: '15080', sidecarMetricsPort: '15090', redisSecret: '', sidecarCpuRequest: '50m', sidecarMemoryRequest: '128Mi', sidecarMemoryLimit: '256Mi', sidecarDrainDelay: '5', runAsUser: '10001' };
    const value = (name: string): string => flagsOf.find((a) => a.startsWith(`${name}=`))!.split('=')[1]!;
    const inject = injectOptionsFromFlags({ ...flags, sidecarTlsSecret: value('--sidecar-tls-secret'), sidecarTlsClientCa: value('--sidecar-tls-client-ca'), sidecarTlsMinVersion: value('--sidecar-tls-min-version'), sidecarH2c: value('--sidecar-h2c') });
    expect(inject.tls).toEqual({ secretName: 'shop-tls', clientCa: true, minVersion: 'TLSv1.3' });
    expect(inject.h2c).toBe(false);
  });

  test('termination: facade and webhook pods get the drain notice (SIGUSR2) and keep serving drainDelaySeconds (preStop); the webhook passes the sidecar its delay', async () => {
    type C = { args: string[]; lifecycle?: unknown };
    const container = (all: Doc[], name: string): C => (find(all, 'Deployment', name) as unknown as { spec: { template: { spec: { containers: C[] } } } }).spec.template.spec.containers[0]!;
    const byDefault = docs(await template());
    for (const d of ['gw-facade', 'gw-webhook']) expect(container(byDefault, d).lifecycle).toEqual({ preStop: { exec: { command: ['sh', '-c', 'kill -s USR2 1; exec sleep 5'] } } });
    expect(container(byDefault, 'gw-webhook').args).toContain('--sidecar-drain-delay=5');
    expect(container(byDefault, 'gw-controller').lifecycle).toBeUndefined();
    const off = docs(await template(['--set', 'facade.drainDelaySeconds=0', '--set', 'webhook.drainDelaySeconds=0', '--set', 'sidecar.drainDelaySeconds=0']));
    for (const d of ['gw-facade', 'gw-webhook']) expect(container(off, d).lifecycle).toBeUndefined();
    expect(container(off, 'gw-webhook').args).toContain('--sidecar-drain-delay=0');
  });

  test("no ConfigMap of the chart takes the name the controller writes its compiled config to (gw-config), even for release `gw`", async () => {
    for (const extra of [[], ['-f', NONDEFAULT]]) {
      const cms = docs(await template(extra)).filter((d) => d.kind === 'ConfigMap').map((d) => d.metadata.name);
      expect(cms.length).toBeGreaterThan(0);
      expect(cms).not.toContain(CONFIG_MAP_NAME);
    }
  });

  test('Redis: external URL by default, password from the Secret (kubelet expands $(GW_REDIS_PASSWORD))', async () => {
    const plain = docs(await template());
    const envOf = (all: Doc[], name: string) => (find(all, 'Deployment', name) as unknown as { spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } } }).spec.template.spec.containers[0]!.env;
    expect(envOf(plain, 'gw-controller')).toContainEqual({ name: 'GW_REDIS', value: 'redis://redis:6379' });
    const withPw = docs(await template(['--set', 'redis.password.existingSecret=my-redis', '--set', 'redis.url=rediss://r.example:6380/2']));
    const env = envOf(withPw, 'gw-controller');
    expect(env).toContainEqual({ name: 'GW_REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'my-redis', key: 'password' } } });
    expect(env).toContainEqual({ name: 'GW_REDIS', value: 'rediss://:$(GW_REDIS_PASSWORD)@r.example:6380/2' });
    expect(withPw.some((d) => d.kind === 'Secret' && d.metadata.name.includes('redis'))).toBe(false);
    const bundled = docs(await template(['--set', 'redis.bundled.enabled=true']));
    expect(find(bundled, 'Deployment', 'gw-redis')).toBeDefined();
    expect(envOf(bundled, 'gw-facade')).toContainEqual({ name: 'GW_REDIS', value: 'redis://:$(GW_REDIS_PASSWORD)@gw-redis.gw-system.svc:6379' });
    const pw = find(bundled, 'Secret', 'gw-redis-password') as Doc & { data: { password: string } };
    expect(Buffer.from(pw.data.password, 'base64').toString()).toMatch(/^[A-Za-z0-9]{32}$/);
  });

  test('credentials: generated when not given (40 random characters each), given values used verbatim', async () => {
    const gen = find(docs(await template()), 'Secret', 'gw-credentials') as Doc & { data: Record<string, string> };
    for (const k of ['secret', 'access_tokens']) expect(Buffer.from(gen.data[k]!, 'base64').toString()).toMatch(/^[A-Za-z0-9]{40}$/);
    const given = find(docs(await template(['-f', NONDEFAULT])), 'Secret', 'gw-credentials') as Doc & { data: Record<string, string> };
    expect(Buffer.from(given.data.access_tokens!, 'base64').toString()).toBe('token-aaaaaaaaaaaaaaaa,token-bbbbbbbbbbbbbbbb');
  });

  test('a changed given credential rolls the facade and the controller (their env reads Secrets only at start); the same values do not', async () => {
    const sums = async (args: string[]): Promise<string[]> => {
      const all = docs(await template(args));
      return ['gw-facade', 'gw-controller'].map((n) => (find(all, 'Deployment', n) as unknown as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec.template.metadata.annotations['checksum/credentials']!);
    };
    const a = await sums(['--set', 'credentials.secret=aaaaaaaaaaaaaaaa']);
    expect(a.every((x) => /^[0-9a-f]{64}$/.test(x))).toBe(true);
    expect(await sums(['--set', 'credentials.secret=aaaaaaaaaaaaaaaa'])).toEqual(a);
    const b = await sums(['--set', 'credentials.secret=bbbbbbbbbbbbbbbb']);
    expect(b[0]).not.toBe(a[0]);
    expect(b[1]).not.toBe(a[1]);
    expect((await sums(['--set', 'credentials.secret=aaaaaaaaaaaaaaaa', '--set', 'redis.password.value=pw0123456789']))[1]).not.toBe(a[1]);
  });

  test('webhook: TLS Secret + caBundle from one generated CA, selectors that keep unrelated namespaces out', async () => {
    const all = docs(await template());
    const tls = find(all, 'Secret', 'gw-webhook-tls') as Doc & { data: Record<string, string> };
    const mwc = find(all, 'MutatingWebhookConfiguration', 'gw-sidecar-injector') as Doc & { webhooks: Record<string, unknown>[] };
    const w = mwc.webhooks[0]!;
    expect((w.clientConfig as { caBundle: string }).caBundle).toBe(tls.data['ca.crt']);
    expect(Buffer.from(tls.data['tls.crt']!, 'base64').toString()).toMatch(/BEGIN CERTIFICATE/);
    expect(w).toMatchObject({ failurePolicy: 'Fail', sideEffects: 'None', timeoutSeconds: 5, reinvocationPolicy: 'IfNeeded' });
    expect(w.namespaceSelector).toEqual({
      matchLabels: { 'gw.io/injection': 'enabled' },
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['gw-system', 'kube-system', 'kube-public', 'kube-node-lease'] }],
    });
    expect(w.objectSelector).toEqual({ matchExpressions: [{ key: 'gw.io/inject', operator: 'NotIn', values: ['false'] }] });
    const cm = docs(await template(['-f', NONDEFAULT]));
    const mwc2 = find(cm, 'MutatingWebhookConfiguration', 'gw-sidecar-injector') as Doc & { metadata: { annotations: Record<string, string> }; webhooks: { clientConfig: Record<string, unknown> }[] };
    expect(mwc2.metadata.annotations['cert-manager.io/inject-ca-from']).toBe('gw-system/gw-webhook');
    expect(mwc2.webhooks[0]!.clientConfig.caBundle).toBeUndefined();
  });
});

describe('chart details: drains, stable renders, a full image name', () => {
  test('a PodDisruptionBudget only for a component with more than one replica (minAvailable 1 of one pod blocks node drains)', async () => {
    const pdbs = async (args: string[]): Promise<string[]> => docs(await template(args)).filter((d) => d.kind === 'PodDisruptionBudget').map((d) => d.metadata.name).sort();
    expect(await pdbs([])).toEqual(['gw-controller', 'gw-facade', 'gw-webhook']);
    expect(await pdbs(['--set', 'controller.replicas=1'])).toEqual(['gw-facade', 'gw-webhook']);
    expect(await pdbs(['--set', 'controller.replicas=1', '--set', 'facade.replicas=1', '--set', 'webhook.replicas=1'])).toEqual([]);
    expect(await pdbs(['--set', 'controller.replicas=3', '--set', 'facade.podDisruptionBudget.enabled=false'])).toEqual(['gw-controller', 'gw-webhook']);
  });

  test('GitOps: with the credentials and the webhook certificate in existing Secrets, two renders are identical and generate no secret', async () => {
    const ca = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
    const given = ['--set', 'credentials.existingSecret=gw-creds', '--set', 'webhook.tls.existingSecret=gw-hook-tls', '--set', `webhook.tls.caBundle=${ca}`];
    const a = await template(given);
    expect(await template(given)).toBe(a);
    const all = docs(a);
    // only the facade's Secret of client secrets, rendered without data (the facade fills it)
    expect(all.filter((d) => d.kind === 'Secret').map((d) => [d.metadata.name, (d as Doc & { data?: unknown }).data])).toEqual([['gw-facade-oauth-clients', undefined]]);
    const hook = find(all, 'Deployment', 'gw-webhook') as unknown as { spec: { template: { spec: { volumes: { secret?: { secretName: string } }[] } } } };
    expect(hook.spec.template.spec.volumes).toContainEqual({ name: 'tls', secret: { secretName: 'gw-hook-tls' } });
    const mwc = find(all, 'MutatingWebhookConfiguration', 'gw-sidecar-injector') as Doc & { webhooks: { clientConfig: { caBundle?: string } }[] };
    expect(mwc.webhooks[0]!.clientConfig.caBundle).toBe(ca);
    const facade = find(all, 'Deployment', 'gw-facade') as unknown as { spec: { template: { spec: { containers: { env: { name: string; valueFrom?: unknown }[] }[] } } } };
    expect(facade.spec.template.spec.containers[0]!.env).toContainEqual({ name: 'GW_SECRET', valueFrom: { secretKeyRef: { name: 'gw-creds', key: 'secret' } } });
    // not vacuous: without them, helm template (no lookup) generates new ones on every render
    expect(await template()).not.toBe(await template());
  });

  test('the default image names its registry (ghcr.io), for the components and the injected sidecar', async () => {
    const all = docs(await template());
    const images = all.filter((d) => d.kind === 'Deployment').map((d) => (d as unknown as { spec: { template: { spec: { containers: { image: string }[] } } } }).spec.template.spec.containers[0]!.image);
    expect(new Set(images)).toEqual(new Set(['ghcr.io/gw-project/gw:0.1.0']));
    const hook = find(all, 'Deployment', 'gw-webhook') as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(hook.spec.template.spec.containers[0]!.args).toContain('--image=ghcr.io/gw-project/gw:0.1.0');
  });
});

describe('the chart and the CLI agree', () => {
  const help = new Map<string, string>();
  async function helpOf(sub: string): Promise<string> {
    if (!help.has(sub)) {
      const r = await run(process.execPath, ['dist/cli/gw.js', sub, '--help']);
      if (r.code !== 0) throw new Error(`gw ${sub} --help: ${r.stderr}`);
      help.set(sub, r.stdout);
    }
    return help.get(sub)!;
  }

  test('every subcommand, flag and GW_* variable the rendered containers use exists in `gw <sub> --help`, and so do the injected sidecar\'s', async () => {
    const checked: string[] = [];
    for (const extra of [[], ['-f', NONDEFAULT]]) {
      for (const d of docs(await template(extra)).filter((x) => x.kind === 'Deployment')) {
        const c = (d as unknown as { spec: { template: { spec: { containers: { image: string; args?: string[]; env?: { name: string }[] }[] } } } }).spec.template.spec.containers[0]!;
        if (!c.args || c.image.startsWith('redis:')) continue;
        const [sub, ...flags] = c.args;
        const text = await helpOf(sub!);
        for (const f of flags) {
          const flag = f.split('=')[0]!;
          expect([d.metadata.name, flag, text.includes(`${flag} `) || text.includes(`${flag}\n`)]).toEqual([d.metadata.name, flag, true]);
          checked.push(`${sub} ${flag}`);
        }
        // Env read by commander shows as "(env: NAME)"; GW_SECRET/GW_ACCESS_TOKENS/GW_REDIS_PASSWORD are read elsewhere.
        for (const e of (c.env ?? []).map((x) => x.name).filter((n) => n.startsWith('GW_') && !['GW_SECRET', 'GW_ACCESS_TOKENS', 'GW_REDIS_PASSWORD'].includes(n))) {
          expect([sub, e, text.includes(`env: ${e}`)]).toEqual([sub, e, true]);
        }
      }
    }
    const listener = { tls: { secretName: 's', clientCa: true, minVersion: 'TLSv1.3' as const }, h2c: false };
    const sidecar = sidecarContainer(defaultInjectOptions, { upstreamPort: 8080, listenPort: 15080, metricsPort: 15090, group: 'g', portName: 'http', config: true, listener }) as { args: string[]; env: { name: string }[] };
    expect(sidecar.args).toEqual(expect.arrayContaining(['--tls-cert', '--tls-key', '--tls-client-ca', '--tls-min-version', '--h2c']));
    const text = await helpOf('sidecar');
    for (const flag of sidecar.args.filter((a) => a.startsWith('--'))) expect([flag, text.includes(flag)]).toEqual([flag, true]);
    const names = sidecar.env.map((x) => x.name);
    for (const e of names.filter((n) => n.startsWith('GW_'))) expect([e, text.includes(`env: ${e}`)]).toEqual([e, true]);
    // the only variables not read by gw itself: glibc's and node's (webhook/inject.ts)
    expect(names.filter((n) => !n.startsWith('GW_'))).toEqual(['MALLOC_ARENA_MAX', 'NODE_OPTIONS']);
    expect(checked).toEqual(expect.arrayContaining(['controller --leader-elect', 'controller --metrics-listen', 'facade --config', 'webhook --tls-cert', 'webhook --sidecar-config-map', 'webhook --sidecar-config-namespaces']));
  }, 60_000);
});

describe('values.schema.json refuses bad values', () => {
  const bad: [string, string[], RegExp][] = [
    ['controller.replicas: 0', ['--set', 'controller.replicas=0'], /controller\.replicas|replicas.*minimum/i],
    ['unknown top-level key', ['--set', 'controler.replicas=2'], /controler/],
    ['webhook.failurePolicy: Sometimes', ['--set', 'webhook.failurePolicy=Sometimes'], /failurePolicy/],
    ['webhook.timeoutSeconds: 60', ['--set', 'webhook.timeoutSeconds=60'], /timeoutSeconds/],
    ['image.pullPolicy: Maybe', ['--set', 'image.pullPolicy=Maybe'], /pullPolicy/],
    ['sidecar.listenPort: 70000', ['--set', 'sidecar.listenPort=70000'], /listenPort/],
    ['redis.url: http://...', ['--set', 'redis.url=http://redis:6379'], /redis\.url|url.*pattern/i],
    ['redis.url with a password', ['--set', 'redis.url=redis://:pw@redis:6379'], /url/],
    ['redis.password.value not URL-safe', ['--set', 'redis.password.value=a@b/c'], /password/],
    ['credentials.accessTokens too short', ['--set', 'credentials.accessTokens[0]=short'], /accessTokens/],
    ['config: unknown option', ['--set', 'config.enable_magic=true'], /enable_magic/],
    ['config.kv_failure_mode: maybe', ['--set', 'config.kv_failure_mode=maybe'], /kv_failure_mode/],
    ['config.secret (credentials do not go in config)', ['--set', 'config.secret=x'], /secret/],
    ['sidecar.namespaces entry without name', ['--set', 'sidecar.namespaces[0].serviceAccounts[0]=default'], /name/],
    ['podSecurityContext.runAsNonRoot: false', ['--set', 'podSecurityContext.runAsNonRoot=false'], /runAsNonRoot/],
    ['podSecurityContext.runAsUser: 0', ['--set', 'podSecurityContext.runAsUser=0'], /runAsUser/],
    ['securityContext.runAsUser: 0 (a container as root)', ['--set', 'securityContext.runAsUser=0'], /runAsUser/],
    ['securityContext.runAsUser: 0 without the schema (template check)', ['--skip-schema-validation', '--set', 'securityContext.runAsUser=0'], /runAsUser 0 \(root\) is refused/],
    ['resources quantity nonsense', ['--set', 'controller.resources.requests.memory=lots'], /memory/],
    ['sidecar ports equal (template check)', ['--set', 'sidecar.metricsPort=15080'], /sidecar\.listenPort and sidecar\.metricsPort must differ/],
    ['existingSecret and secret (template check)', ['--set', 'credentials.existingSecret=c', '--set', 'credentials.secret=s'], /credentials\.existingSecret excludes/],
    ['controller.resources: null (a schema message, not a nil pointer)', ['--set', 'controller.resources=null'], /\/controller.*missing property 'resources'/],
    ['controller.resources.limits.memory: null', ['--set', 'controller.resources.limits.memory=null'], /missing property 'memory'/],
    ['facade.resources: null', ['--set', 'facade.resources=null'], /\/facade.*missing property 'resources'/],
    ['webhook.namespaceSelector: null (a schema message, not a nil pointer)', ['--set', 'webhook.namespaceSelector=null'], /\/webhook.*missing property 'namespaceSelector'/],
    ['webhook.tls: null', ['--set', 'webhook.tls=null'], /missing property 'tls'/],
    ['sidecar.resources: null', ['--set', 'sidecar.resources=null'], /\/sidecar.*missing property 'resources'/],
    ['webhook.tls.existingSecret without caBundle (template check)', ['--set', 'webhook.tls.existingSecret=t'], /existingSecret needs webhook\.tls\.caBundle/],
    ['webhook.tls.caBundle without existingSecret (template check)', ['--set', 'webhook.tls.caBundle=QUJD'], /caBundle is only used with/],
    ['webhook.tls.existingSecret with cert-manager (template check)', ['--set', 'webhook.tls.existingSecret=t', '--set', 'webhook.tls.caBundle=QUJD', '--set', 'webhook.tls.certManager.enabled=true'], /existingSecret excludes webhook\.tls\.certManager/],
    ['empty namespaceSelector (template check)', ['--set', 'webhook.namespaceSelector.matchLabels=null'], /namespaceSelector must select/],
    ['facade namespace the controller does not watch (template check)', ['--set', 'controller.watchNamespace=shop', '--set', 'facade.namespace=other'], /facade\.namespace "other" is not watched by the controller/],
    ['sidecar namespace the controller does not watch (template check)', ['--set', 'controller.watchNamespace=shop', '--set', 'facade.namespace=shop', '--set', 'sidecar.namespaces[0].name=billing'], /sidecar\.namespaces "billing" is not watched/],
    ['sidecar.tls.secretName not a Secret name', ['--set', 'sidecar.tls.secretName=Shop_TLS'], /secretName/],
    ['sidecar.tls.minVersion: TLSv1.1', ['--set', 'sidecar.tls.secretName=t', '--set', 'sidecar.tls.minVersion=TLSv1.1'], /minVersion/],
    ['sidecar.h2c: maybe', ['--set', 'sidecar.h2c=maybe'], /h2c/],
    ['sidecar.tls.clientCA without secretName (template check)', ['--set', 'sidecar.tls.clientCA=true'], /sidecar\.tls\.clientCA needs sidecar\.tls\.secretName/],
    ['a sidecar namespace listed twice (template check)', ['--set', 'sidecar.namespaces[0].name=shop', '--set', 'sidecar.namespaces[1].name=shop'], /sidecar\.namespaces lists "shop" twice/],
  ];
  test.each(bad)('%s → helm template fails with a clear message', async (_n, args, msg) => {
    const r = await helm(['template', 'gw', CHART, ...args]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(msg);
  });

  test('the good values of the table pass (the table is not vacuous)', async () => {
    const r = await helm(['template', 'gw', CHART, '--set', 'controller.replicas=1', '--set', 'webhook.failurePolicy=Ignore', '--set', 'redis.url=redis+sentinel://s1:26379\\,s2:26379/mymaster', '--set', 'config.kv_failure_mode=closed']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  test("the schema's config section names exactly the gateway options (docs/contract.md#gateway-configuration) other than the credentials", () => {
    const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as { properties: { config: { properties: Record<string, unknown> } } };
    const keys = Object.keys(GatewayOptions.shape).filter((k) => k !== 'secret' && k !== 'access_tokens').sort();
    expect(Object.keys(schema.properties.config.properties).sort()).toEqual(keys);
  });
});

describe('NOTES.txt', () => {
  test('tells the next three commands', async () => {
    const values = join(work, 'v.yaml');
    writeFileSync(values, 'facade: {enabled: true}\n');
    // --dry-run=client still asks the API server for its version: the harness's one.
    const r = await helm(['install', 'gw', CHART, '--dry-run=client', '--namespace', 'gw-system', '-f', values, '--kubeconfig', process.env.GW_TEST_KUBECONFIG ?? '']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const notes = r.stdout.slice(r.stdout.indexOf('NOTES:'));
    expect(notes).toMatch(/Next three commands/);
    expect(notes).toMatch(/1\.[\s\S]*kubectl label namespace \S+ gw\.io\/injection=enabled/);
    expect(notes).toMatch(/2\.[\s\S]*kubectl apply -n \S+ -f examples\//);
    expect(notes).toMatch(/3\.[\s\S]*gw\.io\/inject/);
  });
});
