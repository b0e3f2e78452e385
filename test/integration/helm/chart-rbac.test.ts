/**
 * The chart's RBAC is exactly what the code calls (docs/helm.md "RBAC"). CALLS is the table of API calls
 * per component; it is cross-checked against the source: every client call site (`api.get/post/put/
 * patch/delete(`, an Informer, waitForObject) in the components' files must be listed in SITES, so a new
 * call fails here until the table (and the chart) grant it. Then every rule the chart renders for a
 * component's ServiceAccount must be a row of CALLS and every row must be rendered: no grant unused,
 * no call ungranted.
 */
import { describe, expect, test } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm } from '../../helpers/chart-tools.js';
import { SHARD_MAX_INDEX } from '../../../contract/config-shards.js';
import { FACADE_CLIENT_SECRETS } from '../../../facade/backend.js';

const CHART = resolve('helm/gw');
type Who = 'controller' | 'facade' | 'sidecar' | 'uninstall';
/** `names`: restricted to these resourceNames; `scope`: where the rule lives. */
interface Call {
  who: Who;
  group: string;
  resource: string;
  verbs: string[];
  names?: string[];
}
const KINDS = ['apidefinitions', 'policies', 'accesskeys', 'oauthclients'];
const SHARDS = Array.from({ length: SHARD_MAX_INDEX - 1 }, (_, i) => `gw-config-${i + 2}`);
const CONFIG = ['gw-config', ...SHARDS];

const CALLS: Call[] = [
  // controller (controller/operator.ts informers, context.ts finalizers, status.ts, reconcile-key.ts, config-maps.ts, events.ts, leader-election.ts)
  ...KINDS.map((r): Call => ({ who: 'controller', group: 'gw.io', resource: r, verbs: ['list', 'watch', 'patch'] })),
  ...KINDS.map((r): Call => ({ who: 'controller', group: 'gw.io', resource: `${r}/status`, verbs: ['patch'] })),
  { who: 'controller', group: '', resource: 'secrets', verbs: ['get', 'list', 'watch', 'create'] },
  { who: 'controller', group: '', resource: 'configmaps', verbs: ['list', 'watch', 'create'] },
  { who: 'controller', group: '', resource: 'configmaps', verbs: ['get', 'update', 'delete'], names: CONFIG },
  { who: 'controller', group: '', resource: 'events', verbs: ['create'] },
  { who: 'controller', group: 'coordination.k8s.io', resource: 'leases', verbs: ['get', 'update'], names: ['gw-controller'] },
  { who: 'controller', group: 'coordination.k8s.io', resource: 'leases', verbs: ['create'] },
  // facade (facade/backend-kube.ts, lib/kube/wait.ts, sidecar/config/kube-source.ts for the live quota)
  { who: 'facade', group: 'gw.io', resource: 'apidefinitions', verbs: ['list'] },
  { who: 'facade', group: 'gw.io', resource: 'policies', verbs: ['get'] },
  ...['accesskeys', 'oauthclients'].map((r): Call => ({ who: 'facade', group: 'gw.io', resource: r, verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] })),
  // the one Secret of client secrets, created by the chart (templates/facade-client-secrets.yaml): no create
  { who: 'facade', group: '', resource: 'secrets', verbs: ['get', 'update'], names: [FACADE_CLIENT_SECRETS] },
  { who: 'facade', group: '', resource: 'configmaps', verbs: ['list', 'watch'], names: ['gw-config'] },
  { who: 'facade', group: '', resource: 'configmaps', verbs: ['get'], names: SHARDS },
  // sidecar (sidecar/config/kube-source.ts)
  { who: 'sidecar', group: '', resource: 'configmaps', verbs: ['list', 'watch'], names: ['gw-config'] },
  // sidecar (sidecar/config/options-file.ts: the --config-map the webhook names)
  { who: 'sidecar', group: '', resource: 'configmaps', verbs: ['list', 'watch'], names: ['gw-sidecar-config'] },
  { who: 'sidecar', group: '', resource: 'configmaps', verbs: ['get'], names: SHARDS },
  // the pre-delete hook (controller/release-finalizers.ts): the controller stopped, then its finalizers removed
  { who: 'uninstall', group: 'apps', resource: 'deployments', verbs: ['get'], names: ['gw-controller'] },
  { who: 'uninstall', group: 'apps', resource: 'deployments/scale', verbs: ['patch'], names: ['gw-controller'] },
  { who: 'uninstall', group: '', resource: 'pods', verbs: ['list'] },
  ...['accesskeys', 'oauthclients'].map((r): Call => ({ who: 'uninstall', group: 'gw.io', resource: r, verbs: ['list', 'get', 'patch'] })),
];

/**
 * Every client call site of the components' code, by file: [pattern, what it calls (a CALLS row's
 * who/group/resource/verb)]. The count of call sites in a file must equal the rows listed for it.
 */
const SITES: Record<string, [RegExp, string[]][]> = {
  'controller/operator.ts': [
    [/new Informer\(/g, ['the informer behind mk() (list, watch)']],
    [/\bmk\(REFS\.(ApiDefinition|Policy|AccessKey|OAuthClient|Secret|ConfigMap)\b/g, ['controller apidefinitions list,watch', 'controller policies list,watch', 'controller accesskeys list,watch', 'controller oauthclients list,watch', 'controller secrets list,watch', 'controller configmaps list,watch']],
  ],
  'controller/context.ts': [
    [/ctx\.api\.get\(resourcePath\(REFS\.Secret/g, ['controller secrets get']],
    [/ctx\.api\.patch\(/g, ['controller <kinds> patch (finalizer add)']],
    // patchOutFinalizer: the controller's removeFinalizer and the uninstall hook's release both call it
    [/await api\.patch\(\s*resourcePath\(ref, obj/g, ['controller <kinds>, uninstall accesskeys,oauthclients patch (finalizer remove)']],
  ],
  'controller/status.ts': [[/this\.api\.patch\(/g, ['controller <kinds>/status patch']]],
  'controller/reconcile-key.ts': [[/ctx\.api\.post\(resourcePath\(REFS\.Secret/g, ['controller secrets create']]],
  'controller/events.ts': [[/this\.api\.post\(resourcePath\(\{ group: '', version: 'v1', plural: 'events' \}/g, ['controller events create']]],
  'controller/config-maps.ts': [
    [/ctx\.api\.delete\(resourcePath\(REFS\.ConfigMap/g, ['controller configmaps/<gw-config*> delete']],
    [/ctx\.api\.put\(path/g, ['controller configmaps/<gw-config*> update', 'controller configmaps/<gw-config*> update (after a 409)']],
    [/ctx\.api\.post\(resourcePath\(REFS\.ConfigMap/g, ['controller configmaps create']],
    [/ctx\.api\.get\(path\)/g, ['controller configmaps/<gw-config*> get (after a 409)']],
  ],
  'controller/leader-election.ts': [
    [/api\.get\(resourcePath\(ref, namespace, name\)\)/g, ['controller leases/gw-controller get']],
    [/api\.post\(resourcePath\(ref, namespace\)/g, ['controller leases create']],
    [/api\.put\(resourcePath\(ref, namespace, name\)/g, ['controller leases/gw-controller update']],
  ],
  'controller/release-finalizers.ts': [
    [/api\.get\(path\)/g, ['uninstall deployments/gw-controller get']],
    [/api\.get\(resourcePath\(ref, cur\.metadata\.namespace/g, ['uninstall accesskeys,oauthclients get (after a conflict)']],
    [/api\.patch\(resourcePath\(DEPLOYMENTS/g, ['uninstall deployments/gw-controller/scale patch']],
    [/api\.get\(resourcePath\(PODS/g, ['uninstall pods list']],
    [/api\.get\(resourcePath\(ref, opts\.namespace\)\)/g, ['uninstall accesskeys,oauthclients list']],
  ],
  'facade/backend-kube.ts': [
    [/this\.api\.get\(resourcePath\(ref\(plural\), this\.opts\.namespace\)/g, ['facade apidefinitions,accesskeys,oauthclients list']],
    [/this\.api\.get\(resourcePath\(ref\(plural\), namespace, name\)\)/g, ['facade policies,accesskeys,oauthclients get']],
    [/this\.api\.get\(resourcePath\(SECRETS/g, ['facade secrets/gw-facade-oauth-clients get (a hand-applied client\'s own Secret: 403, secret not shown)']],
    [/this\.api\.put\(resourcePath\(ref\(plural\)/g, ['facade accesskeys,oauthclients update']],
    [/this\.api\.post\(resourcePath\(ref\(plural\)/g, ['facade accesskeys,oauthclients create']],
    [/this\.api\.delete\(resourcePath\(ref\('(accesskeys|oauthclients)'\)/g, ['facade accesskeys delete', 'facade oauthclients delete']],
    [/this\.api\.put\(resourcePath\(SECRETS, namespace, FACADE_CLIENT_SECRETS\)/g, ['facade secrets/gw-facade-oauth-clients update']],
    [/waitForObject\(/g, ['facade accesskeys,oauthclients list,watch (metadata.name field selector)']],
  ],
  'sidecar/config/options-file.ts': [
    [/new Informer\(\{[\s\S]{0,200}fieldSelector: `metadata\.name=\$\{o\.name\}`/g, ['sidecar configmaps/gw-sidecar-config list,watch']],
  ],
  'sidecar/config/kube-source.ts': [
    [/this\.api\.get\(resourcePath\(CONFIG_MAPS/g, ['sidecar, facade configmaps/<shards> get']],
    [/new Informer\(\{[\s\S]{0,200}fieldSelector: `metadata\.name=\$\{CONFIG_MAP_NAME\}`/g, ['sidecar, facade configmaps/gw-config list,watch']],
  ],
};
/** Any client call: what SITES must account for, file by file. */
const ANY_CALL = /\bapi\.(get|post|put|patch|delete|watch)\(|new Informer\(|waitForObject\(|\bmk\(REFS\./g;
const COMPONENT_DIRS = ['controller', 'facade', 'sidecar', 'webhook', 'cli'];

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
type Doc = { kind: string; metadata: { name: string; namespace?: string }; rules?: Rule[]; roleRef?: { kind: string; name: string }; subjects?: { name: string; namespace: string }[] };

function sourceFiles(): string[] {
  return COMPONENT_DIRS.flatMap((d) => readdirSync(d, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts')).map((f) => join(d, f)));
}

/** who|group|resource|verb|name (`*`: any name) of every permission. */
const expand = (who: string, group: string, resource: string, verbs: string[], names: string[] | undefined): string[] =>
  verbs.flatMap((v) => (names?.length ? names : ['*']).map((n) => `${who}|${group}|${resource}|${v}|${n}`));

async function granted(args: string[]): Promise<{ perms: Set<string>; docs: Doc[] }> {
  const r = await helm(['template', 'gw', CHART, '--namespace', 'gw-system', ...args]);
  if (r.code !== 0) throw new Error(`helm template: ${r.stderr}`);
  const all = parseAllDocuments(r.stdout).map((d) => d.toJS() as Doc).filter(Boolean);
  const roles = new Map(all.filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole').map((d) => [`${d.kind}/${d.metadata.namespace ?? ''}/${d.metadata.name}`, d]));
  const perms = new Set<string>();
  for (const b of all.filter((d) => d.kind === 'RoleBinding' || d.kind === 'ClusterRoleBinding')) {
    const role = roles.get(`${b.roleRef!.kind}/${b.roleRef!.kind === 'Role' ? (b.metadata.namespace ?? '') : ''}/${b.roleRef!.name}`);
    if (!role) throw new Error(`${b.kind} ${b.metadata.name}: no ${b.roleRef!.kind} ${b.roleRef!.name}`);
    for (const s of b.subjects ?? []) {
      const who: string = s.name === 'gw-controller' ? 'controller' : s.name === 'gw-facade' ? 'facade' : s.name === 'gw-uninstall' ? 'uninstall' : 'sidecar';
      for (const rule of role.rules ?? []) for (const g of rule.apiGroups) for (const res of rule.resources) for (const p of expand(who, g, res, rule.verbs, rule.resourceNames)) perms.add(p);
    }
  }
  return { perms, docs: all };
}

/** What is wrong with the facade's Secret rules: any rule that reaches Secrets other than by the one name, or with a verb beyond get/update/patch. */
function facadeSecretProblems(rules: Rule[]): string[] {
  const reaches = (r: Rule) => r.apiGroups.some((g) => g === '' || g === '*') && r.resources.some((x) => x === 'secrets' || x === '*');
  return rules
    .filter(reaches)
    .filter((r) => JSON.stringify(r.resourceNames ?? []) !== JSON.stringify([FACADE_CLIENT_SECRETS]) || r.verbs.some((v) => !['get', 'update', 'patch'].includes(v)))
    .map((r) => JSON.stringify(r));
}

const wanted = (): Set<string> => new Set(CALLS.flatMap((c) => expand(c.who, c.group, c.resource, c.verbs, c.names)));
const diff = (a: Set<string>, b: Set<string>): string[] => [...a].filter((x) => !b.has(x)).slice(0, 20);

describe('RBAC: the code calls and the chart grants the same thing', () => {
  test('every client call site of controller/, facade/, sidecar/, webhook/, cli/ is in the table (a new call fails until it is granted)', () => {
    const unlisted: string[] = [];
    for (const f of sourceFiles()) {
      const text = readFileSync(f, 'utf8');
      const calls = (text.match(ANY_CALL) ?? []).length;
      const sites = SITES[f] ?? [];
      let listed = 0;
      for (const [re, what] of sites) {
        const n = (text.match(re) ?? []).length;
        expect([f, String(re), n]).toEqual([f, String(re), what.length]);
        listed += n;
      }
      if (calls !== listed) unlisted.push(`${f}: ${calls} client calls, ${listed} in SITES`);
    }
    expect(unlisted).toEqual([]);
    for (const f of Object.keys(SITES)) expect(sourceFiles()).toContain(f);
  });

  test.each([
    ['default values (ClusterRole for the controller)', ['--set', 'sidecar.namespaces[0].name=shop']],
    ['controller.watchNamespace (Roles only)', ['--set', 'controller.watchNamespace=shop', '--set', 'facade.namespace=shop', '--set', 'sidecar.namespaces[0].name=shop']],
  ])('%s: every rendered rule is a call of the table, every call of the table is granted', async (_n, args) => {
    const { perms, docs } = await granted(args);
    const want = wanted();
    expect({ grantedNotCalled: diff(perms, want), calledNotGranted: diff(want, perms) }).toEqual({ grantedNotCalled: [], calledNotGranted: [] });
    // where: the facade's and the sidecar's rules are Roles in their namespace; the Lease a Role in the release namespace
    const roleOf = (name: string): Doc[] => docs.filter((d) => (d.kind === 'Role' || d.kind === 'ClusterRole') && d.metadata.name === name);
    expect(roleOf('gw-facade').map((d) => `${d.kind}/${d.metadata.namespace}`)).toEqual([`Role/${args.includes('facade.namespace=shop') ? 'shop' : 'gw-system'}`]);
    expect(roleOf('gw-sidecar').map((d) => `${d.kind}/${d.metadata.namespace}`)).toEqual(['Role/shop']);
    expect(roleOf('gw-controller-leader-election').map((d) => `${d.kind}/${d.metadata.namespace}`)).toEqual(['Role/gw-system']);
    expect(roleOf('gw-controller').map((d) => `${d.kind}/${d.metadata.namespace ?? ''}`)).toEqual([args.includes('controller.watchNamespace=shop') ? 'Role/shop' : 'ClusterRole/']);
  });

  test('the facade reaches Secrets only by the name of the one the chart creates: get/update, never create, delete, list, watch', async () => {
    for (const args of [[], ['--set', 'facade.namespace=shop']]) {
      const { docs } = await granted(['--set', 'sidecar.namespaces[0].name=shop', ...args]);
      const facade = docs.filter((d) => (d.kind === 'Role' || d.kind === 'ClusterRole') && d.metadata.name === 'gw-facade');
      expect(facade).toHaveLength(1);
      expect(facadeSecretProblems(facade[0]!.rules ?? [])).toEqual([]);
      // the Secret it updates exists from the install on: rendered empty in facade.namespace, labelled for the controller
      const sec = docs.filter((d) => d.kind === 'Secret' && d.metadata.name === FACADE_CLIENT_SECRETS) as (Doc & { data?: unknown; metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } })[];
      expect(sec.map((d) => [d.metadata.namespace, d.data, d.metadata.labels?.['gw.io/secret'], d.metadata.annotations?.['helm.sh/resource-policy']])).toEqual([[args.length ? 'shop' : 'gw-system', undefined, 'true', 'keep']]);
    }
    // and neither does the table of calls (which the rendered rules must equal)
    expect(CALLS.filter((c) => c.who === 'facade' && c.resource === 'secrets' && (!c.names || c.verbs.some((v) => !['get', 'update', 'patch'].includes(v))))).toEqual([]);
    // not vacuous: a create or delete of Secrets, or a Secret rule without names, is found
    const bad: Rule[] = [
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      { apiGroups: [''], resources: ['secrets'], resourceNames: [FACADE_CLIENT_SECRETS], verbs: ['get', 'delete'] },
      { apiGroups: ['*'], resources: ['*'], verbs: ['get'] },
    ];
    expect(facadeSecretProblems(bad)).toHaveLength(3);
  });

  test('the table is not vacuous: a grant the code does not call, or a call not granted, is found', async () => {
    const { perms } = await granted(['--set', 'sidecar.namespaces[0].name=shop']);
    const want = wanted();
    perms.add('controller||configmaps|patch|*');
    want.add('facade||pods|list|*');
    expect(diff(perms, want)).toContain('controller||configmaps|patch|*');
    expect(diff(want, perms)).toContain('facade||pods|list|*');
  });
});
