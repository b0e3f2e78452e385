/** For integration tests: kubectl against the run's real kube-apiserver (started by jest globalSetup). */
import { execFile } from 'node:child_process';
import { kubectlBin } from '../harness/kube.js';

export function kubeconfig(): string {
  const k = process.env.GW_TEST_KUBECONFIG;
  if (!k)
    throw new Error(
      'GW_TEST_KUBECONFIG is not set: run the tests through `make test` (jest globalSetup starts kube-apiserver)',
    );
  return k;
}

export function kubectl(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = execFile(
      kubectlBin(),
      ['--kubeconfig', kubeconfig(), ...args],
      { timeout: 30_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
    if (input !== undefined) {
      p.stdin!.on('error', () => undefined); // kubectl failing early (EPIPE) reports through its exit code
      p.stdin!.end(input);
    }
  });
}

let n = 0;
/** A fresh namespace per test file, so suites never see each other's resources. */
export async function freshNamespace(prefix = 'gwt'): Promise<string> {
  const ns = `${prefix}-${process.pid}-${n++}`;
  const r = await kubectl(['create', 'namespace', ns]);
  if (r.code !== 0) throw new Error(`cannot create namespace ${ns}: ${r.stderr}`);
  return ns;
}
