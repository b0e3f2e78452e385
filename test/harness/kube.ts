/**
 * A real Kubernetes control plane (etcd + kube-apiserver, no controllers, no nodes) on loopback,
 * the "envtest approach". Binaries come from `bash test/servers/build.sh`.
 */
import { spawn, execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  openSync,
  closeSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The kubectl the tests use: GW_TEST_KUBECTL, else the one test/servers/build.sh built into the cache
 * (on a machine without kubectl; same version as the apiserver), else kubectl from PATH.
 */
export function kubectlBin(cache = process.env.GW_TEST_CACHE ?? join(homedir(), '.cache', 'gw-test')): string {
  if (process.env.GW_TEST_KUBECTL) return process.env.GW_TEST_KUBECTL;
  const own = join(cache, 'bin', 'kubectl');
  return existsSync(own) ? own : 'kubectl';
}

export interface KubeHandle {
  /** https://127.0.0.1:<port> (self-signed cert) */
  server: string;
  /** static token of user gw-admin in group system:masters */
  token: string;
  /** static token of user gw-limited, no groups: has no RBAC permissions unless a test grants them */
  limitedToken: string;
  /** admin kubeconfig (token auth, insecure-skip-tls-verify) */
  kubeconfigPath: string;
  versions: { kubeApiserver: string; etcd: string };
  stop(): Promise<void>;
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function launch(bin: string, args: string[], log: string): ChildProcess {
  const fd = openSync(log, 'a');
  const proc = spawn(bin, args, { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  return proc;
}

async function kill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** GET over TLS without verifying the apiserver's self-signed certificate. */
function get(url: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const headers = token ? { authorization: `Bearer ${token}` } : undefined;
    const req = request(url, { rejectUnauthorized: false, headers, timeout: 2000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end();
  });
}

export async function startKube(opts: { cacheDir?: string } = {}): Promise<KubeHandle> {
  const cache = opts.cacheDir ?? process.env.GW_TEST_CACHE ?? join(homedir(), '.cache', 'gw-test');
  const apiserverBin = join(cache, 'bin', 'kube-apiserver');
  const etcdBin = join(cache, 'bin', 'etcd');
  if (!existsSync(apiserverBin) || !existsSync(etcdBin)) {
    throw new Error(`kube-apiserver/etcd not found in ${join(cache, 'bin')}: run \`bash test/servers/build.sh\``);
  }
  const versions = {
    kubeApiserver: execFileSync(apiserverBin, ['--version'])
      .toString()
      .trim()
      .replace(/^Kubernetes /, ''),
    etcd: /etcd Version: (\S+)/.exec(execFileSync(etcdBin, ['--version']).toString())?.[1] ?? 'unknown',
  };

  const dir = mkdtempSync(join(tmpdir(), 'gw-kube-'));
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const token = randomBytes(16).toString('hex');
  const limitedToken = randomBytes(16).toString('hex');
  writeFileSync(
    join(dir, 'tokens.csv'),
    `${token},gw-admin,gw-admin,"system:masters"\n${limitedToken},gw-limited,gw-limited\n`,
  );
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }));
  writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const etcdLog = join(dir, 'etcd.log');
  const etcd = launch(
    etcdBin,
    [
      '--name=gw',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=gw=${peerUrl}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
    etcdLog,
  );

  const server = `https://127.0.0.1:${apiPort}`;
  const apiLog = join(dir, 'kube-apiserver.log');
  const apiserver = launch(
    apiserverBin,
    [
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--etcd-servers=${etcdUrl}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      // No controller-manager creates the default ServiceAccount, so pods would be rejected without this.
      '--disable-admission-plugins=ServiceAccount',
      '--profiling=false',
    ],
    apiLog,
  );

  // If the test process dies without calling stop(), don't leave servers behind.
  const onExit = () => {
    apiserver.kill('SIGKILL');
    etcd.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  const stop = async (): Promise<void> => {
    await kill(apiserver);
    await kill(etcd);
    rmSync(dir, { recursive: true, force: true });
    process.removeListener('exit', onExit);
  };

  const deadline = Date.now() + 60_000;
  for (;;) {
    const { status, body } = await get(`${server}/readyz`, token);
    if (status === 200 && body.trim() === 'ok') break;
    const died = apiserver.exitCode !== null || etcd.exitCode !== null;
    if (died || Date.now() > deadline) {
      const msg =
        `kube-apiserver not ready on ${server} (${died ? 'a process exited' : 'timeout 60 s'}; last /readyz ${status})\n` +
        `--- kube-apiserver log tail ---\n${tail(apiLog)}\n--- etcd log tail ---\n${tail(etcdLog, 10)}`;
      await stop();
      throw new Error(msg);
    }
    await sleep(200);
  }

  const kubeconfigPath = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfigPath,
    `apiVersion: v1
kind: Config
clusters:
- name: gw-test
  cluster:
    server: ${server}
    insecure-skip-tls-verify: true
users:
- name: gw-admin
  user:
    token: ${token}
contexts:
- name: gw-test
  context:
    cluster: gw-test
    user: gw-admin
current-context: gw-test
`,
  );

  return { server, token, limitedToken, kubeconfigPath, versions, stop };
}

/** `kubectl apply` every *.yaml in dir, then wait until each CRD applied is Established. */
export async function applyCrds(handle: KubeHandle, dir: string): Promise<void> {
  const kubectl = (...args: string[]) => run(kubectlBin(), ['--kubeconfig', handle.kubeconfigPath, ...args]);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  if (files.length === 0) return;
  const { stdout } = await kubectl('apply', '-o', 'name', ...files.flatMap((f) => ['-f', join(dir, f)]));
  const crds = stdout.split('\n').filter((n) => n.startsWith('customresourcedefinition.'));
  if (crds.length > 0) await kubectl('wait', '--for=condition=Established', '--timeout=60s', ...crds);
}
