import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKubeConnection } from '../../../lib/kube/connection.js';

function kubeconfig(
  user: string,
  cluster = 'server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true',
): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-kc-'));
  const file = join(dir, 'config');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster:
    ${cluster}
users:
- name: u
  user:
    ${user}
contexts:
- name: c
  context: {cluster: k, user: u}
`,
  );
  return file;
}

describe('operator kube connection (kubeconfig without client-node)', () => {
  test('token user: bearer header, server without trailing slash, a TLS dispatcher', async () => {
    const c = await loadKubeConnection(
      kubeconfig('token: abc123', 'server: https://127.0.0.1:6443/\n    insecure-skip-tls-verify: true'),
    );
    expect(c.server).toBe('https://127.0.0.1:6443');
    expect(await c.headers()).toEqual({ authorization: 'Bearer abc123' });
    expect(c.dispatcher).toBeDefined();
  });

  test('tokenFile relative to the kubeconfig; basic auth', async () => {
    const file = kubeconfig('tokenFile: tok');
    writeFileSync(join(file, '..', 'tok'), 'from-file\n');
    expect(await (await loadKubeConnection(file)).headers()).toEqual({ authorization: 'Bearer from-file' });
    const basic = await loadKubeConnection(kubeconfig('username: a\n    password: b'));
    expect(await basic.headers()).toEqual({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` });
  });

  test('a malformed kubeconfig or a missing file is a one-line error naming the flag', async () => {
    await expect(loadKubeConnection(kubeconfig('token: x', 'server: not a url'))).rejects.toThrow(
      /--kubeconfig: .*clusters\.0\.cluster\.server/,
    );
    await expect(loadKubeConnection('/nonexistent/kubeconfig')).rejects.toThrow(/--kubeconfig: cannot load/);
    const badYaml = join(mkdtempSync(join(tmpdir(), 'gw-kc-')), 'config');
    writeFileSync(badYaml, 'clusters: [\n');
    const err = await loadKubeConnection(badYaml).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/^--kubeconfig: cannot load .*: invalid YAML: .*line 2, column 1$/);
  });

  test('no kubeconfig outside a cluster: a clear error', async () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      await expect(loadKubeConnection()).rejects.toThrow(/not running in a cluster/);
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });
});
