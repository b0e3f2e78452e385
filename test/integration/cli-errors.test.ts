/**
 * docs/contract.md#processes: every subcommand exits non-zero with a one-line reason on bad configuration: a missing
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
    [
      'sidecar with an upstream that is not http(s)',
      ['sidecar', '--upstream', 'ftp://127.0.0.1:1/', '--listen', '127.0.0.1:0'],
      /^gw: --upstream: "ftp:\/\/127\.0\.0\.1:1\/" is not an http\(s\) URL$/,
    ],
    [
      'a store URL whose port is not a number',
      [
        'standalone',
        '--resources',
        '<dir>',
        '--listen',
        '127.0.0.1:0',
        '--admin-listen',
        '127.0.0.1:0',
        '--redis',
        'redis://127.0.0.1:notaport',
      ],
      /^gw: --redis: /,
    ],
    [
      'facade without a kubeconfig outside a cluster',
      ['facade', '--listen', '127.0.0.1:0'],
      /^gw: --kubeconfig: .*no --kubeconfig given/,
    ],
    [
      'controller with an unknown flag',
      ['controller', '--bogus-flag'],
      /^gw controller: unknown option '--bogus-flag'$/,
    ],
    [
      'a client command with an unknown flag',
      ['keys', 'list', '--bogus-flag'],
      /^gw keys list: unknown option '--bogus-flag'$/,
    ],
    ['an unknown subcommand', ['frobnicate'], /^gw: unknown command 'frobnicate'$/],
    [
      'a namespace that cannot exist',
      ['controller', '--namespace', 'Bad_NS!'],
      /--namespace.*'Bad_NS!' is invalid\. must be a Kubernetes namespace name/,
    ],
    [
      'facade with a malformed kubeconfig',
      ['facade', '--kubeconfig', '<bad>', '--listen', '127.0.0.1:0'],
      /--kubeconfig: cannot load .*kubeconfig\.yaml: .*/,
    ],
    [
      'controller with a missing kubeconfig',
      ['controller', '--kubeconfig', join('/nonexistent', 'kubeconfig'), '--metrics-listen', '127.0.0.1:0'],
      /--kubeconfig/,
    ],
    [
      'a listen address that is not HOST:PORT, refused before any start-up work',
      ['standalone', '--resources', '<dir>', '--listen', 'bogus'],
      /^gw standalone: option '--listen <host:port>' argument 'bogus' is invalid\. expected HOST:PORT\.$/,
    ],
    [
      'GW_LEADER_ELECT neither true nor false',
      ['controller', '<GW_LEADER_ELECT=maybe>'],
      /GW_LEADER_ELECT.*is invalid\. must be true or false/,
    ],
    [
      'a log level pino does not know',
      [
        'standalone',
        '--resources',
        '<dir>',
        '--listen',
        '127.0.0.1:0',
        '--admin-listen',
        '127.0.0.1:0',
        '<GW_LOG_LEVEL=bogus>',
      ],
      /^gw: GW_LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent \(got "bogus"\)$/,
    ],
  ])('%s', async (_what, args, reason) => {
    const env: Record<string, string | undefined> = { ...process.env, GW_SECRET: 's', GW_ACCESS_TOKENS: 't' };
    const argv = args
      .filter((a) => !/^<GW_\w+=/.test(a))
      .map((a) => (a === '<bad>' ? badYaml : a === '<dir>' ? dir : a));
    for (const a of args) {
      const m = /^<(GW_\w+)=(.*)>$/.exec(a);
      if (m) env[m[1]!] = m[2];
    }
    const r = await run(process.execPath, [CLI, ...argv], { timeoutMs: 20_000, env });
    expect(r.code).not.toBe(0);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(reason);
  });

  test('a node older than 22 (package.json engines): the version named, not an unrelated TypeError', async () => {
    // node 20 as far as gw can tell (process.version and process.versions.node)
    const old =
      'data:text/javascript,Object.defineProperty(process, "versions", {value: {...process.versions, node: "20.1.0"}});' +
      'Object.defineProperty(process, "version", {value: "v20.1.0"})';
    const r = await run(process.execPath, ['--import', old, CLI, 'standalone', '--resources', dir], {
      timeoutMs: 20_000,
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('gw: needs Node.js 22 or later (this is v20.1.0); `make run` fetches one');
  });
});
