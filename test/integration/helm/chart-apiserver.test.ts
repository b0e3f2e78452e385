/**
 * The chart on the real kube-apiserver (RBAC on): the rendered chart server-side applied (default and
 * non-default values), each ServiceAccount impersonated with `kubectl auth can-i` (a table: exactly what
 * it needs, nothing more), and `helm install` + `helm upgrade` keeping generated credentials, the Redis
 * password and the webhook CA (helm lookup).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm } from '../../helpers/chart-tools.js';
import { freshNamespace, kubeconfig, kubectl } from '../../helpers/kube.js';

const CHART = resolve('helm/gw');
const NONDEFAULT = resolve('test/integration/helm/fixtures/values-nondefault.yaml');
const STUB_CRDS = resolve('test/integration/helm/fixtures/crds');
// No namespace carries this label, so the installed webhooks (no endpoints behind their Services) never
// see a pod of another test.
const NO_INJECTION = ['--set', `webhook.namespaceSelector.matchLabels.gw\\.io/injection-test=never-${process.pid}`];

type Doc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };
const docs = (text: string): Doc[] => parseAllDocuments(text).map((d) => d.toJS() as Doc).filter(Boolean);

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function render(release: string, ns: string, extra: string[]): Promise<string> {
  const r = await helm(['template', release, CHART, '--namespace', ns, ...NO_INJECTION, ...extra]);
  if (r.code !== 0) throw new Error(`helm template: ${r.stderr}`);
  return r.stdout;
}

let rel: string; // release namespace
let app: string; // application namespace (sidecar)
let other: string; // an unrelated namespace
let defaultText = '';
let defaultApplied: string[] = [];

beforeAll(async () => {
  rel = await freshNamespace('gwh-rel');
  app = await freshNamespace('gwh-app');
  other = await freshNamespace('gwh-other');
  await ok(['apply', '--server-side', '-f', STUB_CRDS]);
  await ok(['wait', '--for=condition=Established', '--timeout=30s', 'crd/servicemonitors.monitoring.coreos.com', 'crd/podmonitors.monitoring.coreos.com', 'crd/prometheusrules.monitoring.coreos.com', 'crd/issuers.cert-manager.io', 'crd/certificates.cert-manager.io']);
  // The default render, applied once: the SSA test checks the result, the can-i table runs against it.
  defaultText = await render('gwssa', rel, ['--set', `sidecar.namespaces[0].name=${app}`, '--set', `sidecar.namespaces[0].serviceAccounts={default,checkout}`]);
  defaultApplied = (await ok(['apply', '--server-side', '--field-manager=helm-test', '-o', 'name', '-f', '-'], defaultText)).trim().split('\n');
}, 60_000);

afterAll(async () => {
  for (const n of [rel, app, other]) if (n) await kubectl(['delete', 'namespace', n, '--wait=false']);
  await kubectl(['delete', 'mutatingwebhookconfiguration', 'gwssa-sidecar-injector', 'gwnd-sidecar-injector', '--ignore-not-found']);
  await kubectl(['delete', 'clusterrole,clusterrolebinding', 'gwssa-controller', '--ignore-not-found']);
});

describe('server-side apply of the rendered chart', () => {
  test('default values + one sidecar namespace: every object is accepted', async () => {
    const applied = defaultApplied;
    expect(applied).toHaveLength(docs(defaultText).length);
    expect(applied).toEqual(expect.arrayContaining([
      'deployment.apps/gwssa-controller', 'deployment.apps/gwssa-facade', 'deployment.apps/gwssa-webhook',
      'mutatingwebhookconfiguration.admissionregistration.k8s.io/gwssa-sidecar-injector',
      'clusterrole.rbac.authorization.k8s.io/gwssa-controller', 'role.rbac.authorization.k8s.io/gwssa-sidecar',
      'poddisruptionbudget.policy/gwssa-controller', 'secret/gwssa-credentials', 'secret/gwssa-webhook-tls',
    ]));
    // The sidecar's Role and Redis Secret landed in the application namespace.
    await ok(['-n', app, 'get', 'role/gwssa-sidecar', 'rolebinding/gwssa-sidecar', 'secret/gw-redis']);
  });

  test('non-default values (bundled Redis, cert-manager, ServiceMonitor, watch one namespace): every object is accepted', async () => {
    // The fixture's namespace `shop` becomes this run's own.
    const text = (await render('gwnd', rel, ['-f', NONDEFAULT])).replace(/\bshop\b/g, app);
    const out = await ok(['apply', '--server-side', '--field-manager=helm-test', '-o', 'name', '-f', '-'], text);
    expect(out.trim().split('\n')).toHaveLength(docs(text).length);
    await ok(['-n', rel, 'get', 'servicemonitor/gwnd-controller', 'podmonitor/gwnd-sidecars', 'prometheusrule/gwnd', 'configmap/gwnd-dashboard', 'certificate/gwnd-webhook', 'deployment/gwnd-redis']);
    await ok(['-n', app, 'get', 'role/gwnd-controller', 'rolebinding/gwnd-controller']);
  });

  test('nothing in the chart is cluster-admin or a wildcard', async () => {
    for (const extra of [[], ['-f', NONDEFAULT]]) {
      for (const d of docs(await render('gwx', 'gwx', extra))) {
        if (d.kind === 'ClusterRoleBinding' || d.kind === 'RoleBinding') expect((d as unknown as { roleRef: { name: string } }).roleRef.name).not.toMatch(/admin|edit/);
        if (d.kind === 'ClusterRole' || d.kind === 'Role') {
          for (const r of (d as unknown as { rules: { verbs: string[]; resources: string[]; apiGroups: string[] }[] }).rules) {
            expect([...r.verbs, ...r.resources, ...r.apiGroups]).not.toContain('*');
          }
        }
      }
    }
  });
});

describe('RBAC: kubectl auth can-i as each ServiceAccount', () => {
  // [who, verb, resource, namespace ('' = all namespaces), subresource, expected]
  type Row = [string, string, string, string, string, boolean];
  const table = (): Row[] => {
    const controller = `system:serviceaccount:${rel}:gwssa-controller`;
    const facade = `system:serviceaccount:${rel}:gwssa-facade`;
    const webhook = `system:serviceaccount:${rel}:gwssa-webhook`;
    const sidecar = `system:serviceaccount:${app}:default`;
    const sidecar2 = `system:serviceaccount:${app}:checkout`;
    const stranger = `system:serviceaccount:${app}:someone-else`;
    return [
      // controller: the four kinds (+ status, finalizers), Secrets, ConfigMaps, Events, Leases (own namespace)
      [controller, 'list', 'apidefinitions.gw.io', '', '', true],
      [controller, 'watch', 'policies.gw.io', '', '', true],
      [controller, 'patch', 'accesskeys.gw.io', app, '', true],
      [controller, 'get', 'accesskeys.gw.io', app, '', false],
      [controller, 'update', 'oauthclients.gw.io', app, '', false],
      [controller, 'update', 'apidefinitions.gw.io', app, 'status', false],
      [controller, 'patch', 'accesskeys.gw.io', app, 'status', true],
      [controller, 'update', 'policies.gw.io', app, 'finalizers', false],
      [controller, 'create', 'secrets', app, '', true],
      // Secrets: a referenced one read by name, labelled ones watched (gw.io/secret selector); never changed
      [controller, 'get', 'secrets', app, '', true],
      [controller, 'watch', 'secrets', app, '', true],
      [controller, 'update', 'secrets', app, '', false],
      [controller, 'patch', 'secrets', app, '', false],
      [controller, 'create', 'configmaps', app, '', true],
      [controller, 'update', 'configmaps', app, '', false],
      [controller, 'update', 'configmaps/gw-config', app, '', true],
      [controller, 'delete', 'configmaps/gw-config-511', app, '', true],
      [controller, 'delete', 'configmaps/grafana-dashboards', app, '', false],
      [controller, 'create', 'events', app, '', true],
      [controller, 'create', 'events.events.k8s.io', app, '', false],
      [controller, 'update', 'leases.coordination.k8s.io/gw-controller', rel, '', true],
      [controller, 'update', 'leases.coordination.k8s.io/other', rel, '', false],
      [controller, 'create', 'leases.coordination.k8s.io', app, '', false],
      [controller, 'create', 'apidefinitions.gw.io', app, '', false],
      [controller, 'delete', 'accesskeys.gw.io', app, '', false],
      [controller, 'delete', 'secrets', app, '', false],
      [controller, 'list', 'pods', app, '', false],
      [controller, 'create', 'deployments.apps', rel, '', false],
      [controller, 'create', 'clusterrolebindings.rbac.authorization.k8s.io', '', '', false],
      [controller, '*', '*', '', '', false],
      // facade: writes the four kinds and their Secrets, in its namespace only
      [facade, 'create', 'apidefinitions.gw.io', rel, '', false],
      [facade, 'list', 'apidefinitions.gw.io', rel, '', true],
      [facade, 'update', 'policies.gw.io', rel, '', false],
      [facade, 'get', 'policies.gw.io', rel, '', true],
      [facade, 'list', 'secrets', rel, '', false],
      [facade, 'delete', 'accesskeys.gw.io', rel, '', true],
      [facade, 'create', 'oauthclients.gw.io', rel, '', true],
      [facade, 'list', 'oauthclients.gw.io', rel, '', true],
      // Secrets: only its one Secret of client secrets (the chart creates it), read and replaced by name; no create
      [facade, 'create', 'secrets', rel, '', false],
      [facade, 'patch', 'secrets/gw-facade-oauth-clients', rel, '', false],
      [facade, 'get', 'secrets/gw-facade-oauth-clients', rel, '', true],
      [facade, 'update', 'secrets/gw-facade-oauth-clients', rel, '', true],
      [facade, 'get', 'secrets', rel, '', false],
      [facade, 'get', 'secrets/gwssa-credentials', rel, '', false],
      [facade, 'update', 'secrets/other', rel, '', false],
      [facade, 'delete', 'secrets', rel, '', false],
      [facade, 'delete', 'secrets/gw-facade-oauth-clients', rel, '', false],
      [facade, 'watch', 'secrets', rel, '', false],
      [facade, 'create', 'accesskeys.gw.io', app, '', false],
      [facade, 'get', 'secrets', app, '', false],
      [facade, 'list', 'apidefinitions.gw.io', '', '', false],
      [facade, 'update', 'apidefinitions.gw.io', rel, 'status', false],
      [facade, 'create', 'configmaps', rel, '', false],
      // reads the compiled config gw-config (live quota values with Redis), and no other ConfigMap
      [facade, 'list', 'configmaps/gw-config', rel, '', true],
      [facade, 'watch', 'configmaps/gw-config', rel, '', true],
      [facade, 'get', 'configmaps/gw-config-511', rel, '', true],
      [facade, 'get', 'configmaps/gw-config-512', rel, '', false],
      [facade, 'get', 'configmaps/other', rel, '', false],
      [facade, 'get', 'pods', rel, '', false],
      [facade, 'create', 'leases.coordination.k8s.io', rel, '', false],
      // webhook: nothing at all (no token is even mounted)
      [webhook, 'get', 'pods', rel, '', false],
      [webhook, 'get', 'configmaps', rel, '', false],
      [webhook, 'list', 'secrets', rel, '', false],
      [webhook, 'get', 'apidefinitions.gw.io', rel, '', false],
      // sidecar (the app's ServiceAccounts listed in sidecar.namespaces): its ConfigMap gw-config, read only
      [sidecar, 'list', 'configmaps/gw-config', app, '', true],
      [sidecar, 'get', 'configmaps/gw-config', app, '', false],
      [sidecar, 'watch', 'configmaps/gw-config', app, '', true],
      [sidecar2, 'watch', 'configmaps/gw-config', app, '', true],
      [sidecar, 'update', 'configmaps/gw-config', app, '', false],
      [sidecar, 'delete', 'configmaps/gw-config', app, '', false],
      // the shards of a sharded config, by name (contract/config-shards.ts: gw-config-2 … gw-config-511)
      [sidecar, 'get', 'configmaps/gw-config-2', app, '', true],
      [sidecar, 'get', 'configmaps/gw-config-511', app, '', true],
      [sidecar, 'get', 'configmaps/gw-config-1', app, '', false],
      [sidecar, 'get', 'configmaps/gw-config-512', app, '', false],
      [sidecar, 'update', 'configmaps/gw-config-2', app, '', false],
      [sidecar, 'get', 'configmaps/other', app, '', false],
      [sidecar, 'list', 'configmaps', app, '', false],
      [sidecar, 'watch', 'configmaps', app, '', false],
      [sidecar, 'get', 'secrets/gw-redis', app, '', false],
      [sidecar, 'get', 'configmaps/gw-config', rel, '', false],
      [sidecar, 'get', 'apidefinitions.gw.io', app, '', false],
      [stranger, 'list', 'configmaps/gw-config', app, '', false],
    ];
  };

  test('the whole table (one row per permission, needed → yes, anything else → no)', async () => {
    const rows = table();
    const results = await Promise.all(
      rows.map(async ([who, verb, res, ns, sub]) => {
        const args = ['auth', 'can-i', verb, res, '--as', who, ...(ns ? ['-n', ns] : ['--all-namespaces']), ...(sub ? [`--subresource=${sub}`] : [])];
        const r = await kubectl(args);
        if (r.code !== 0 && r.code !== 1) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
        return r.stdout.trim() === 'yes';
      }),
    );
    const wrong = rows.filter((row, i) => results[i] !== row[5]).map(([who, verb, res, ns, sub, want]) => `${who.split(':').slice(2).join(':')} ${verb} ${res}${sub ? '/' + sub : ''} in ${ns || '*'}: want ${want ? 'yes' : 'no'}`);
    expect(wrong).toEqual([]);
    expect(rows.length).toBeGreaterThanOrEqual(50);
  }, 60_000);
});

describe('helm install + helm upgrade on the real API server', () => {
  test('generated credentials, Redis password and webhook CA survive an upgrade; caBundle matches the Secret', async () => {
    const ns = await freshNamespace('gwh-inst');
    const common = ['gwrel', CHART, '--namespace', ns, '--kubeconfig', kubeconfig(), ...NO_INJECTION, '--set', 'redis.bundled.enabled=true'];
    const snapshot = async () => ({
      creds: JSON.parse(await ok(['-n', ns, 'get', 'secret', 'gwrel-credentials', '-o', 'jsonpath={.data}'])) as Record<string, string>,
      redis: await ok(['-n', ns, 'get', 'secret', 'gwrel-redis-password', '-o', 'jsonpath={.data.password}']),
      tls: JSON.parse(await ok(['-n', ns, 'get', 'secret', 'gwrel-webhook-tls', '-o', 'jsonpath={.data}'])) as Record<string, string>,
      caBundle: await ok(['get', 'mutatingwebhookconfiguration', 'gwrel-sidecar-injector', '-o', 'jsonpath={.webhooks[0].clientConfig.caBundle}']),
    });
    try {
      const i = await helm(['install', ...common], { timeoutMs: 90_000 });
      expect(i.stderr).toBe('');
      expect(i.code).toBe(0);
      const first = await snapshot();
      expect(Buffer.from(first.creds.secret!, 'base64').toString()).toMatch(/^[A-Za-z0-9]{40}$/);
      // the facade's Secret of client secrets: created empty; a key the facade writes (a replace of data only,
      // as here) survives upgrades, the uninstall and a reinstall (helm's three-way merge, resource-policy keep)
      const clientKeys = async () => JSON.parse((await ok(['-n', ns, 'get', 'secret', 'gw-facade-oauth-clients', '-o', 'jsonpath={.data}'])) || '{}') as Record<string, string>;
      expect(await clientKeys()).toEqual({});
      await ok(['-n', ns, 'patch', 'secret', 'gw-facade-oauth-clients', '--type', 'merge', '-p', JSON.stringify({ data: { 'oauth-0123456789abcdef': 'czE=' } })]);
      expect(first.caBundle).toBe(first.tls['ca.crt']);
      const u = await helm(['upgrade', ...common, '--set', 'controller.replicas=3'], { timeoutMs: 90_000 });
      expect(u.stderr).toBe('');
      expect(u.code).toBe(0);
      expect(await ok(['-n', ns, 'get', 'deployment', 'gwrel-controller', '-o', 'jsonpath={.spec.replicas}'])).toBe('3');
      const second = await snapshot();
      expect(second).toEqual(first);
      expect(await clientKeys()).toEqual({ 'oauth-0123456789abcdef': 'czE=' });
      // A value given explicitly still wins over the kept one.
      const u2 = await helm(['upgrade', ...common, '--set', 'credentials.accessTokens[0]=explicit-token-0123456789'], { timeoutMs: 90_000 });
      expect(u2.code).toBe(0);
      const third = await snapshot();
      expect(Buffer.from(third.creds.access_tokens!, 'base64').toString()).toBe('explicit-token-0123456789');
      expect(third.creds.secret).toBe(first.creds.secret);
      // uninstall keeps the credentials Secret and the facade's (resource-policy keep); a reinstall adopts and keeps them.
      // --no-hooks: no kubelet here runs the pre-delete Job (make e2e runs it on a real node)
      expect((await helm(['uninstall', 'gwrel', '--namespace', ns, '--kubeconfig', kubeconfig(), '--no-hooks'])).code).toBe(0);
      expect((await kubectl(['-n', ns, 'get', 'secret', 'gwrel-webhook-tls'])).code).not.toBe(0);
      const kept = JSON.parse(await ok(['-n', ns, 'get', 'secret', 'gwrel-credentials', '-o', 'jsonpath={.data}'])) as Record<string, string>;
      expect(kept.secret).toBe(first.creds.secret);
      expect(await clientKeys()).toEqual({ 'oauth-0123456789abcdef': 'czE=' });
      const re = await helm(['install', ...common], { timeoutMs: 90_000 });
      expect(re.stderr).toBe('');
      expect(re.code).toBe(0);
      const fourth = await snapshot();
      expect(fourth.creds.secret).toBe(first.creds.secret);
      expect(await clientKeys()).toEqual({ 'oauth-0123456789abcdef': 'czE=' });
    } finally {
      await helm(['uninstall', 'gwrel', '--namespace', ns, '--kubeconfig', kubeconfig(), '--no-hooks']);
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    }
  }, 120_000);
});

test('the CRD upgrade path documented in docs/helm.md works: server-side apply of the chart crds/ over installed ones', async () => {
  // Why not `helm show crds | kubectl apply -f -`: helm joins the files without `---`, one CRD would survive.
  const shown = await helm(['show', 'crds', CHART]);
  expect(shown.code).toBe(0);
  expect(parseAllDocuments(shown.stdout).length).toBeLessThan(4);
  const doc = readFileSync('docs/helm.md', 'utf8');
  expect(doc).toMatch(/kubectl apply --server-side --force-conflicts -f \.\/helm\/gw\/crds\//);
  const out = await ok(['apply', '--server-side', '--force-conflicts', '-o', 'name', '-f', join(CHART, 'crds')]);
  expect(out.trim().split('\n').sort()).toEqual([
    'customresourcedefinition.apiextensions.k8s.io/accesskeys.gw.io',
    'customresourcedefinition.apiextensions.k8s.io/apidefinitions.gw.io',
    'customresourcedefinition.apiextensions.k8s.io/oauthclients.gw.io',
    'customresourcedefinition.apiextensions.k8s.io/policies.gw.io',
  ]);
});
