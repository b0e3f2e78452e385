/**
 * `gw webhook` as a process on loopback, registered with the real kube-apiserver by the chart's own
 * MutatingWebhookConfiguration (rules, selectors, failurePolicy as rendered) with its clientConfig
 * pointed at https://127.0.0.1:PORT/mutate and a test CA. No kubelet: pods stay Pending, which is fine.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm, run } from '../../helpers/chart-tools.js';
import { freshNamespace, kubectl } from '../../helpers/kube.js';

const CHART = resolve('helm/gw');
const LABEL = 'gw.io/injection-e2e';
const MWC = `gw-e2e-${process.pid}`;
let dir: string;
let webhook: ChildProcess | undefined;
let port = 0;
let inj: string; // labelled namespace: sent to the webhook
let unrelated: string; // not labelled

type Container = { name: string; args?: string[]; ports?: { name?: string; containerPort: number }[] };
type PodJson = { metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> }; spec: { containers: Container[] } };

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

function podManifest(name: string, opts: { annotations?: Record<string, string>; labels?: Record<string, string>; containers?: Container[] } = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations: opts.annotations, labels: { app: 'orders', ...opts.labels } },
    spec: { containers: opts.containers ?? [{ name: 'app', image: 'registry.example/orders:1', ports: [{ name: 'http', containerPort: 8080 }] }] },
  });
}

async function createPod(ns: string, manifest: string): Promise<{ code: number; pod?: PodJson; stderr: string }> {
  const r = await kubectl(['-n', ns, 'create', '-o', 'json', '-f', '-'], manifest);
  return r.code === 0 ? { code: 0, pod: JSON.parse(r.stdout) as PodJson, stderr: r.stderr } : { code: r.code, stderr: r.stderr };
}

const INJECT = { 'gw.io/inject': 'true' };

/** The chart's webhook container args, with the listen address and certificate paths of this test. */
function localArgs(chartArgs: string[]): string[] {
  const swap: Record<string, string> = { '--listen': '127.0.0.1:0', '--tls-cert': join(dir, 'tls.crt'), '--tls-key': join(dir, 'tls.key') };
  return chartArgs.map((a) => {
    const [flag] = a.split('=', 1);
    return flag && swap[flag] ? `${flag}=${swap[flag]}` : a;
  });
}

let chartArgs: string[] = [];

function startWebhook(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const p = spawn(process.execPath, ['dist/cli/gw.js', ...localArgs(chartArgs)], { stdio: ['ignore', 'pipe', 'pipe'] });
    webhook = p;
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`gw webhook not ready in 15 s: ${out}${err}`)), 15_000);
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"listen":"127\.0\.0\.1:(\d+)".*gw webhook ready/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolvePort(Number(m[1]));
      }
    });
    p.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gw webhook exited ${code}: ${err}`));
    });
  });
}

async function stopWebhook(): Promise<void> {
  const p = webhook;
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gw-webhook-'));
  const ssl = async (args: string[]) => {
    const r = await run('openssl', args, { cwd: dir });
    if (r.code !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  await ssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=gw-test-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'tls.key', '-out', 'tls.csr', '-subj', '/CN=127.0.0.1']);
  // SAN for the loopback IP the API server dials.
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n');
  await ssl(['x509', '-req', '-in', 'tls.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'tls.crt', '-days', '1', '-extfile', 'ext.cnf']);
  // The chart's webhook: its Deployment's args run here, its MutatingWebhookConfiguration is registered
  // with the clientConfig swapped for the loopback URL + test CA.
  const r = await helm(['template', 'gw', CHART, '--namespace', 'gw-system', '--show-only', 'templates/webhook.yaml', '--set-string', `webhook.namespaceSelector.matchLabels.gw\\.io/injection-e2e=${process.pid}`]);
  if (r.code !== 0) throw new Error(r.stderr);
  type Rendered = { kind: string; metadata: { name: string }; webhooks: { clientConfig: unknown }[]; spec: { template: { spec: { containers: { args: string[] }[] } } } };
  const rendered = parseAllDocuments(r.stdout).map((d) => d.toJS() as Rendered).filter(Boolean);
  chartArgs = rendered.find((d) => d.kind === 'Deployment')!.spec.template.spec.containers[0]!.args;
  expect(chartArgs[0]).toBe('webhook');
  port = await startWebhook();

  inj = await freshNamespace('gwh-inj');
  unrelated = await freshNamespace('gwh-unrel');
  await ok(['label', 'namespace', inj, `gw.io/injection=enabled`, `${LABEL}=${process.pid}`]);

  const mwc = rendered.find((d) => d.kind === 'MutatingWebhookConfiguration');
  if (!mwc) throw new Error('no MutatingWebhookConfiguration rendered');
  mwc.metadata.name = MWC;
  mwc.webhooks[0]!.clientConfig = { url: `https://127.0.0.1:${port}/mutate`, caBundle: readFileSync(join(dir, 'ca.crt')).toString('base64') };
  await ok(['apply', '--server-side', '-f', '-'], JSON.stringify(mwc));

  // The API server picks the configuration up asynchronously: wait until a dry-run admission injects.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const d = await kubectl(['-n', inj, 'create', '--dry-run=server', '-o', 'json', '-f', '-'], podManifest('probe', { annotations: INJECT }));
    if (d.code === 0 && (JSON.parse(d.stdout) as PodJson).spec.containers.length === 2) break;
    if (Date.now() > deadline) throw new Error(`webhook never took effect: ${d.stderr}`);
    await new Promise((r2) => setTimeout(r2, 250));
  }
}, 90_000);

afterAll(async () => {
  await stopWebhook();
  await kubectl(['delete', 'mutatingwebhookconfiguration', MWC, '--ignore-not-found']);
  for (const n of [inj, unrelated]) if (n) await kubectl(['delete', 'namespace', n, '--wait=false']);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('mutating admission webhook on the real API server', () => {
  test('an annotated Pod gets the sidecar; the app port is rewired by name', async () => {
    const { pod, stderr } = await createPod(inj, podManifest('annotated', { annotations: INJECT }));
    expect(stderr).toBe('');
    const names = pod!.spec.containers.map((c) => c.name);
    expect(names).toEqual(['app', 'gw-sidecar']);
    const [appC, side] = pod!.spec.containers;
    expect(appC!.ports).toEqual([expect.objectContaining({ name: 'gw-upstream', containerPort: 8080 })]);
    expect((side as Container & { image: string }).image).toBe('ghcr.io/gw-project/gw:0.1.0'); // the chart's image, via --image
    expect(side!.args).toEqual(['sidecar', '--upstream', 'http://127.0.0.1:8080', '--listen', '0.0.0.0:15080', '--metrics-listen', '0.0.0.0:15090', '--group', 'orders', '--drain-delay', '5']);
    // the termination hooks, as the API server stored them (the app's sleep action included)
    expect((side as Container & { lifecycle?: unknown }).lifecycle).toEqual({ preStop: { httpGet: { path: '/prestop', port: 15090, scheme: 'HTTP' } } });
    expect((appC as Container & { lifecycle?: unknown }).lifecycle).toEqual({ preStop: { sleep: { seconds: 7 } } });
    expect(side!.ports).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'http', containerPort: 15080 })]));
    expect(pod!.metadata.annotations?.['gw.io/status']).toBe('injected');
    // Stored as admitted: read back from the API server.
    const stored = JSON.parse(await ok(['-n', inj, 'get', 'pod', 'annotated', '-o', 'json'])) as PodJson;
    expect(stored.spec.containers.map((c) => c.name)).toEqual(['app', 'gw-sidecar']);
  });

  test('an unannotated Pod in the same namespace is untouched', async () => {
    const { pod } = await createPod(inj, podManifest('plain'));
    expect(pod!.spec.containers.map((c) => c.name)).toEqual(['app']);
    expect(pod!.spec.containers[0]!.ports).toEqual([expect.objectContaining({ name: 'http', containerPort: 8080 })]);
    expect(pod!.metadata.annotations?.['gw.io/status']).toBeUndefined();
  });

  test('a second admission does not double-inject (a pod created from an injected pod spec)', async () => {
    const first = JSON.parse(await ok(['-n', inj, 'get', 'pod', 'annotated', '-o', 'json'])) as PodJson & { spec: Record<string, unknown> };
    const again = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'readmitted', annotations: first.metadata.annotations, labels: first.metadata.labels },
      spec: { containers: first.spec.containers },
    };
    const { pod, stderr } = await createPod(inj, JSON.stringify(again));
    expect(stderr).toBe('');
    expect(pod!.spec.containers.filter((c) => c.name === 'gw-sidecar')).toHaveLength(1);
    expect(pod!.spec.containers).toHaveLength(2);
  });

  test('objectSelector: a pod labelled gw.io/inject=false is never sent to the webhook', async () => {
    const { pod } = await createPod(inj, podManifest('opted-out', { annotations: INJECT, labels: { 'gw.io/inject': 'false' } }));
    expect(pod!.spec.containers.map((c) => c.name)).toEqual(['app']);
  });

  test('an annotated pod in an unrelated (unlabelled) namespace is not injected', async () => {
    const { pod } = await createPod(unrelated, podManifest('elsewhere', { annotations: INJECT }));
    expect(pod!.spec.containers.map((c) => c.name)).toEqual(['app']);
  });

  test('webhook down: unrelated namespace still admits pods; the opted-in namespace fails closed (failurePolicy Fail), or open with Ignore', async () => {
    await stopWebhook();
    const a = await createPod(unrelated, podManifest('while-down', { annotations: INJECT }));
    expect(a.stderr).toBe('');
    expect(a.code).toBe(0);
    expect(a.pod!.spec.containers.map((c) => c.name)).toEqual(['app']);
    const plain = await createPod(unrelated, podManifest('while-down-plain'));
    expect(plain.code).toBe(0);

    const b = await createPod(inj, podManifest('refused', { annotations: INJECT }));
    expect(b.code).not.toBe(0);
    expect(b.stderr).toMatch(/failed calling webhook "sidecar-injector\.gw\.io"/);

    await ok(['patch', 'mutatingwebhookconfiguration', MWC, '--type=json', '-p', '[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]']);
    const deadline = Date.now() + 20_000;
    let c = await createPod(inj, podManifest('ignored-0', { annotations: INJECT }));
    for (let i = 1; c.code !== 0 && Date.now() < deadline; i++) {
      await new Promise((r) => setTimeout(r, 250));
      c = await createPod(inj, podManifest(`ignored-${i}`, { annotations: INJECT }));
    }
    expect(c.code).toBe(0);
    expect(c.pod!.spec.containers.map((x) => x.name)).toEqual(['app']);
  }, 60_000);
});
