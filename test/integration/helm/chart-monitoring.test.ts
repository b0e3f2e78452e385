/**
 * The chart's monitoring objects (docs/contract.md#observability, docs/observability.md): ServiceMonitors, the sidecars'
 * PodMonitor, the PrometheusRule and the Grafana dashboard ConfigMap, each behind its value and off by
 * default; rendered and validated by kubeconform -strict against prometheus-operator's own CRD schemas;
 * the alert rules checked by `promtool check rules` and unit-tested by `promtool test rules`.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { helm, kubeconform, run, toolPath, writeApiServerSchemas, writeCrdSchemas } from '../../helpers/chart-tools.js';

const CHART = resolve('helm/gw');
const CRDS = resolve('test/integration/helm/fixtures/crds');
const ALERT_TESTS = resolve('test/integration/helm/fixtures/alerts.test.yaml');
let schemas: string;
let work: string;

type Doc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: unknown };
const docs = (text: string): Doc[] => parseAllDocuments(text).map((d) => d.toJS() as Doc).filter(Boolean);
const MONITORING = ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'];
const isDashboard = (d: Doc): boolean => d.kind === 'ConfigMap' && d.metadata.labels?.grafana_dashboard === '1';

async function template(extra: string[] = []): Promise<Doc[]> {
  const r = await helm(['template', 'gw', CHART, '--namespace', 'gw-system', ...extra]);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  const s = await kubeconform(r.stdout, schemas);
  expect(s.messages).toEqual([]);
  expect({ invalid: s.invalid, errors: s.errors, skipped: s.skipped }).toEqual({ invalid: 0, errors: 0, skipped: 0 });
  return docs(r.stdout);
}

beforeAll(async () => {
  const server = process.env.GW_TEST_KUBE_SERVER;
  const token = process.env.GW_TEST_KUBE_TOKEN;
  if (!server || !token) throw new Error('GW_TEST_KUBE_SERVER/TOKEN unset: run through jest globalSetup');
  schemas = mkdtempSync(join(tmpdir(), 'gw-kubeconform-'));
  work = mkdtempSync(join(tmpdir(), 'gw-monitoring-'));
  await writeApiServerSchemas(server, token, schemas);
  writeCrdSchemas(join(CHART, 'crds'), schemas);
  expect(writeCrdSchemas(CRDS, schemas)).toEqual(
    expect.arrayContaining(['monitoring.coreos.com/v1/ServiceMonitor', 'monitoring.coreos.com/v1/PodMonitor', 'monitoring.coreos.com/v1/PrometheusRule']),
  );
}, 60_000);

afterAll(() => {
  rmSync(schemas, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

describe('each monitoring object behind its value, off by default, valid against the prometheus-operator CRDs', () => {
  test('default values: none of them', async () => {
    const all = await template();
    expect(all.filter((d) => MONITORING.includes(d.kind) || isDashboard(d))).toEqual([]);
  });

  test.each([
    ['serviceMonitor.enabled', ['ServiceMonitor/gw-controller', 'ServiceMonitor/gw-facade']],
    ['podMonitor.enabled', ['PodMonitor/gw-sidecars']],
    ['prometheusRule.enabled', ['PrometheusRule/gw']],
    ['grafanaDashboard.enabled', ['ConfigMap/gw-dashboard']],
  ])('%s=true renders exactly its objects', async (value, expected) => {
    const all = await template(['--set', `${value}=true`]);
    const got = all.filter((d) => MONITORING.includes(d.kind) || isDashboard(d)).map((d) => `${d.kind}/${d.metadata.name}`);
    expect(got.sort()).toEqual([...expected].sort());
  });

  test('kubeconform is not vacuous for these kinds: a wrong field in a PrometheusRule fails', async () => {
    const bad = stringify({
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: { name: 'x' },
      spec: { groups: [{ name: 'g', rules: [{ alert: 'A', expression: 'up == 0' }] }] },
    });
    const s = await kubeconform(bad, schemas);
    expect(s.invalid).toBe(1);
  });

  test("the PodMonitor scrapes the sidecars' gw-metrics port in sidecar.namespaces (or podMonitor.namespaces, or all)", async () => {
    const pm = (extra: string[]) => template(['--set', 'podMonitor.enabled=true', ...extra]).then((a) => a.find((d) => d.kind === 'PodMonitor')!);
    const any = (await pm([])) as unknown as { spec: Record<string, unknown> };
    expect(any.spec).toMatchObject({ selector: {}, namespaceSelector: { any: true }, podMetricsEndpoints: [{ port: 'gw-metrics', path: '/metrics' }] });
    const shop = (await pm(['--set', 'sidecar.namespaces[0].name=shop'])) as unknown as { spec: Record<string, unknown> };
    expect(shop.spec.namespaceSelector).toEqual({ matchNames: ['shop'] });
    const own = (await pm(['--set', 'sidecar.namespaces[0].name=shop', '--set', 'podMonitor.namespaces={a,b}'])) as unknown as { spec: Record<string, unknown> };
    expect(own.spec.namespaceSelector).toEqual({ matchNames: ['a', 'b'] });
  });

  test('the dashboard: labelled grafana_dashboard "1", valid JSON, the panels docs/observability.md names, on metrics gw exports', async () => {
    const all = await template(['--set', 'grafanaDashboard.enabled=true', '--set', 'grafanaDashboard.namespace=monitoring']);
    const cm = all.find(isDashboard) as unknown as { metadata: { namespace: string }; data: Record<string, string> };
    expect(cm.metadata.namespace).toBe('monitoring');
    const dash = JSON.parse(cm.data['gw.json']!) as { uid: string; panels: { title: string; targets: { expr: string }[] }[] };
    const titles = dash.panels.map((p) => p.title);
    for (const t of ['Requests per API', 'Refusals per API and scope', 'Quota refusals', 'Decision latency', 'Upstream latency p99 per API', 'Store errors and reachability', 'DRL peers', 'Smoothing allowance'])
      expect(titles).toContain(t);
    const doc = readFileSync('docs/observability.md', 'utf8');
    for (const t of titles) expect(doc).toContain(t);
    const metrics = new Set(dash.panels.flatMap((p) => p.targets.flatMap((t) => t.expr.match(/gw_[a-z_]+/g) ?? [])));
    for (const m of metrics) expect(m).toMatch(/^gw_(requests|rate_limited|rate_limiter_unavailable|quota_exceeded|decision_seconds_bucket|upstream_seconds_bucket|store_errors|store_up|drl_peers|smoothing_allowance|config_errors|controller_reconciles|trace_export_failures|oauth_token_errors)(_total)?$/);
  });
});

describe('alert rules: promtool check rules + promtool test rules', () => {
  let promtool: string;
  beforeAll(() => {
    promtool = toolPath('promtool');
  });

  async function rulesFile(extra: string[] = []): Promise<string> {
    const all = await template(['--set', 'prometheusRule.enabled=true', ...extra]);
    const rule = all.find((d) => d.kind === 'PrometheusRule') as unknown as { spec: { groups: unknown[] } };
    const f = join(work, 'rules.yaml');
    writeFileSync(f, stringify({ groups: rule.spec.groups }));
    return f;
  }

  test('every alert docs/contract.md#observability and docs/observability.md name is there; promtool check rules passes', async () => {
    const f = await rulesFile();
    const r = await run(promtool, ['check', 'rules', f]);
    expect(r.stdout + r.stderr).toMatch(/SUCCESS: 6 rules found/);
    expect(r.code).toBe(0);
    const text = readFileSync(f, 'utf8');
    const doc = readFileSync('docs/observability.md', 'utf8');
    for (const a of ['GwStoreUnreachable', 'GwConfigRefused', 'GwResourceRefused', 'GwRateLimitedRatioHigh', 'GwDrlPeersMissing', 'GwOAuthTokenErrorsHigh']) {
      expect(text).toContain(`alert: ${a}`);
      expect(doc).toContain(a);
    }
  });

  test('promtool test rules: each alert fires on its condition and stays quiet otherwise', async () => {
    await rulesFile();
    copyFileSync(ALERT_TESTS, join(work, 'alerts.test.yaml'));
    const r = await run(promtool, ['test', 'rules', join(work, 'alerts.test.yaml')]);
    expect(r.stdout + r.stderr).toMatch(/SUCCESS/);
    expect(r.code).toBe(0);
  });

  test('a threshold from the values reaches the expression (and a rule that would not parse fails promtool)', async () => {
    const f = await rulesFile(['--set-json', 'prometheusRule.rateLimitedRatio=0.5']);
    expect(readFileSync(f, 'utf8')).toMatch(/\) > 0\.5/);
    writeFileSync(f, stringify({ groups: [{ name: 'g', rules: [{ alert: 'A', expr: 'sum by (x (up)' }] }] }));
    expect((await run(promtool, ['check', 'rules', f])).code).not.toBe(0);
  });
});
