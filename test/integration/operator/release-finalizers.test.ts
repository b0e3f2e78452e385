/**
 * `gw release-finalizers`, the chart's pre-delete hook (docs/helm.md, "Uninstall"): it scales the
 * controller's Deployment to 0, waits until no controller pod is left, then removes the controller's
 * finalizers (and only those) from the AccessKeys and OAuthClients of the watched namespace, so deleting
 * them afterwards completes. Real kube-apiserver; the pods are API objects no kubelet runs.
 */
import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import { freshNamespace, kubeconfig, kubectl } from '../../helpers/kube.js';
import { CLI } from '../../helpers/standalone.js';
import { accessKey, apply, eventually, getJson, oauthClient } from './helpers.js';

jest.setTimeout(60_000);

const FOREIGN = 'example.com/keep';
const labels = { app: 'gw-controller-test' };

function release(args: string[]): { done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const p = spawn(process.execPath, [CLI, 'release-finalizers', '--kubeconfig', kubeconfig(), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return { done: new Promise((resolve) => p.on('close', (code) => resolve({ code, stdout, stderr }))) };
}

const finalizers = async (ns: string, kind: string, name: string): Promise<string[]> =>
  ((await getJson(ns, kind, name))?.metadata as { finalizers?: string[] } | undefined)?.finalizers ?? [];

const deployment = (name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: {
    replicas: 2,
    selector: { matchLabels: labels },
    template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'localhost/none:1' }] } },
  },
});
const pod = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { containers: [{ name: 'c', image: 'localhost/none:1' }] },
});
const withFinalizers = <T extends { metadata: object }>(doc: T, list: string[]): T => ({
  ...doc,
  metadata: { ...doc.metadata, finalizers: list },
});

describe('gw release-finalizers (the pre-delete hook)', () => {
  test('stops the controller first, then removes only its finalizers; deleting the resources then completes', async () => {
    const ns = await freshNamespace('release');
    const other = await freshNamespace('release-other');
    await apply(ns, deployment('gw-controller'), pod('gw-controller-a'));
    await apply(
      ns,
      withFinalizers(accessKey('k1', { key_hash: 'a'.repeat(64), rate: 1, per: 1 }), [
        'gw.io/session-cleanup',
        FOREIGN,
      ]),
      withFinalizers(accessKey('k2', { key_hash: 'b'.repeat(64), rate: 1, per: 1 }), ['gw.io/session-cleanup']),
      withFinalizers(
        oauthClient('c1', { api_id: 'pets', client_id: 'cid-1', secretRef: { name: 'client-1', key: 'secret' } }),
        ['gw.io/client-cleanup'],
      ),
    );
    // outside the watched namespace: left alone
    await apply(
      other,
      withFinalizers(accessKey('k9', { key_hash: 'c'.repeat(64), rate: 1, per: 1 }), ['gw.io/session-cleanup']),
    );

    const run = release(['--controller', `${ns}/gw-controller`, '--namespace', ns, '--timeout', '30']);
    // the Deployment goes to 0 at once; nothing is released while a controller pod is still there
    await eventually(async () => {
      const d = await getJson(ns, 'deployment', 'gw-controller');
      return (d?.spec as { replicas?: number } | undefined)?.replicas === 0 ? true : undefined;
    }, 15_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await finalizers(ns, 'accesskey', 'k2')).toEqual(['gw.io/session-cleanup']);
    await kubectl(['-n', ns, 'delete', 'pod', 'gw-controller-a', '--grace-period=0', '--force']);

    const r = await run.done;
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const done = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string; removed?: unknown })
      .find((l) => l.msg === 'finalizers released');
    expect(done?.removed).toEqual({ accesskeys: 2, oauthclients: 1 });
    expect(await finalizers(ns, 'accesskey', 'k1')).toEqual([FOREIGN]);
    expect(await finalizers(ns, 'accesskey', 'k2')).toEqual([]);
    expect(await finalizers(ns, 'oauthclient', 'c1')).toEqual([]);
    expect(await finalizers(other, 'accesskey', 'k9')).toEqual(['gw.io/session-cleanup']);

    const del = await kubectl(['-n', ns, 'delete', 'accesskey/k2', 'oauthclient/c1', '--timeout=10s']);
    expect(del.code).toBe(0);
    expect(await getJson(ns, 'accesskey', 'k2')).toBeUndefined();
  });

  test('a controller pod that does not go: exit 1 naming the Deployment, no finalizer removed', async () => {
    const ns = await freshNamespace('release-stuck');
    await apply(ns, deployment('gw-controller'), pod('gw-controller-b'));
    await apply(
      ns,
      withFinalizers(accessKey('k1', { key_hash: 'd'.repeat(64), rate: 1, per: 1 }), ['gw.io/session-cleanup']),
    );
    const r = await release(['--controller', `${ns}/gw-controller`, '--namespace', ns, '--timeout', '2']).done;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${ns}/gw-controller: 1 controller pod(s) still running`);
    expect(await finalizers(ns, 'accesskey', 'k1')).toEqual(['gw.io/session-cleanup']);
  });

  test('a bad --controller is a usage error naming the flag', async () => {
    const r = await release(['--controller', 'not a name']).done;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--controller: expected NAMESPACE/DEPLOYMENT');
  });
});
