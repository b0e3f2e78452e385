/**
 * SPEC.md §1: every subcommand exits non-zero with a one-line reason on bad configuration: a missing
 * required flag, an unknown flag, an invalid namespace name, an unreadable or malformed kubeconfig.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from '../helpers/chart-tools.js';
import { CLI, cleanup, tempDir } from '../helpers/standalone.js';

describe('bad configuration: non-zero exit, one line on stderr', () => {
  let dir: string;
  let badYaml: string;
  beforeAll(() => {
    dir = tempDir('gw-cli-');
    badYaml = join(dir, 'kubeconfig.yaml');
    writeFileSync(badYaml, 'clusters: [\n');
  });
  afterAll(() => cleanup(dir));

  test.each([
    ['sidecar without --upstream', ['sidecar', '--listen', '127.0.0.1:0'], /--upstream/],
    ['controller with an unknown flag', ['controller', '--bogus-flag'], /unknown option '--bogus-flag'/],
    ['an unknown subcommand', ['frobnicate'], /unknown command 'frobnicate'/],
    ['a namespace that cannot exist', ['controller', '--namespace', 'Bad_NS!'], /--namespace.*'Bad_NS!' is invalid\. must be a Kubernetes namespace name/],
    ['facade with a malformed kubeconfig', ['facade', '--kubeconfig', '<bad>', '--listen', '127.0.0.1:0'], /--kubeconfig: cannot load .*kubeconfig\.yaml: .*/],
    ['controller with a missing kubeconfig', ['controller', '--kubeconfig', join('/nonexistent', 'kubeconfig'), '--metrics-listen', '127.0.0.1:0'], /--kubeconfig/],
  ])('%s', async (_what, args, reason) => {
    const r = await run(process.execPath, [CLI, ...args.map((a) => (a === '<bad>' ? badYaml : a))], { timeoutMs: 20_000, env: { ...process.env, GW_SECRET: 's', GW_ACCESS_TOKENS: 't' } });
    expect(r.code).not.toBe(0);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(reason);
  });
});
