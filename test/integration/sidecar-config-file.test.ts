/**
 * A changed gateway configuration file reaches a running `gw sidecar` without a restart (docs/contract.md#faults):
 * the file is laid out as kubelet mounts a ConfigMap volume (`config.yaml` → `..data/config.yaml`,
 * `..data` → a timestamped directory) and replaced the way kubelet does it (a new directory, then an
 * atomic rename of the `..data` symlink). A live option (rate_limit_response_headers) takes effect within
 * 10 s; an option that applies only at a restart is named in a warn line; a file that does not validate
 * is refused with the field named, the options in force kept.
 * With `--config-map` (what the webhook passes) the ConfigMap itself is watched through the API server:
 * a change applies within 2 s of the write, with the mounted file still as it was (the kubelet refreshes a
 * volume only after its sync period, about a minute).
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { freshNamespace, kubectl } from '../helpers/kube.js';
import { tempDir } from '../helpers/standalone.js';
import { configOf, eventually, metricsText, startSidecar, writeConfigMap, type Sidecar } from '../helpers/sidecar.js';

/** A ConfigMap volume as kubelet writes it, with kubelet's atomic update. */
function configMapVolume(dir: string) {
  let n = 0;
  let current: string | undefined;
  const write = (text: string): void => {
    const ts = join(dir, `..2026_11_26_${n++}`);
    mkdirSync(ts);
    writeFileSync(join(ts, 'config.yaml'), text);
    symlinkSync(ts.slice(dir.length + 1), join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data')); // atomic swap of the symlink
    if (current) rmSync(current, { recursive: true });
    current = ts;
  };
  return {
    file: join(dir, 'config.yaml'),
    init(text: string) {
      write(text);
      symlinkSync('..data/config.yaml', join(dir, 'config.yaml'));
    },
    write,
  };
}

/** The sidecar and the echo upstream of a suite, stopped (either may not have started). */
async function stopBoth(s: Sidecar | undefined, echo: { server: { close(): unknown } } | undefined): Promise<void> {
  await s?.stop();
  echo?.server.close();
}

/** The X-RateLimit-Limit header of a request to the sidecar's `/a/` API (absent: no header). */
async function limitHeaderOf(s: Sidecar): Promise<string | undefined> {
  const r = await request(`${s.gw}/a/x`);
  await r.body.dump();
  const h = r.headers['x-ratelimit-limit'];
  return typeof h === 'string' ? h : undefined;
}

describe('gw sidecar follows its mounted --config file', () => {
  let s: Sidecar;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let vol: ReturnType<typeof configMapVolume>;

  beforeAll(async () => {
    const ns = await freshNamespace('sidecar-cfgfile');
    echo = await startEcho();
    await writeConfigMap(ns, configOf(ns, [{ name: 'a', path: '/a/', rate: 1000, per: 60 }]));
    vol = configMapVolume(tempDir('gw-cm-vol-'));
    vol.init('rate_limit_response_headers: rate_limits\nupstream_timeout: 30\n');
    s = await startSidecar({ ns, upstream: echo.url, configFile: vol.file });
  }, 30_000);
  afterAll(() => stopBoth(s, echo));
  const limitHeader = (): Promise<string | undefined> => limitHeaderOf(s);

  test('a live option applies within 10 s; a restart-only one is named; an invalid file is refused', async () => {
    expect(await limitHeader()).toBe('1000');
    const t0 = Date.now();
    // quotas: the keyless API has no quota, so the X-RateLimit-* headers go
    vol.write('rate_limit_response_headers: quotas\nupstream_timeout: 5\n');
    await eventually(async () => (await limitHeader()) === undefined, 10_000, 'the live option applied');
    expect(Date.now() - t0).toBeLessThan(10_000);
    await eventually(async () => /restart_required/.test(s.out()), 5000, 'the restart-only option named');
    const line = JSON.parse(
      s
        .out()
        .split('\n')
        .find((l) => l.includes('restart_required'))!,
    ) as {
      restart_required: string[];
      msg: string;
    };
    expect(line.restart_required).toEqual(['upstream_timeout']);
    expect(line.msg).toContain('upstream_timeout');
    expect(s.out()).toMatch(/"applied":\["rate_limit_response_headers"\]/);

    vol.write('rate_limit_response_headers: sometimes\n');
    await eventually(async () => /gateway config file refused/.test(s.out()), 10_000, 'the bad file refused');
    expect(s.out()).toMatch(/rate_limit_response_headers/);
    expect(await metricsText(s)).toMatch(/^gw_config_errors_total [1-9]/m);
    expect(await limitHeader()).toBeUndefined(); // the options in force stay

    vol.write('rate_limit_response_headers: rate_limits\nupstream_timeout: 5\n');
    await eventually(async () => (await limitHeader()) === '1000', 10_000, 'back to rate_limits');
    expect(s.proc.exitCode).toBeNull(); // never restarted
  }, 60_000);
});

describe('gw sidecar --config-map follows the ConfigMap through the API server', () => {
  let s: Sidecar;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let ns: string;
  const options = async (text: string): Promise<void> => {
    const cm = JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'gw-sidecar-config', namespace: ns },
      data: { 'config.yaml': text },
    });
    const r = await kubectl(['apply', '-f', '-'], cm);
    if (r.code !== 0) throw new Error(r.stderr);
  };

  beforeAll(async () => {
    ns = await freshNamespace('sidecar-cfgmap');
    echo = await startEcho();
    await writeConfigMap(ns, configOf(ns, [{ name: 'a', path: '/a/', rate: 1000, per: 60 }]));
    const text = 'rate_limit_response_headers: rate_limits\n';
    await options(text);
    const dir = tempDir('gw-cm-file-');
    writeFileSync(join(dir, 'config.yaml'), text);
    s = await startSidecar({
      ns,
      upstream: echo.url,
      configFile: join(dir, 'config.yaml'),
      args: ['--config-map', 'gw-sidecar-config'],
    });
  }, 30_000);
  afterAll(() => stopBoth(s, echo));
  const limitHeader = (): Promise<string | undefined> => limitHeaderOf(s);

  test('a live option written to the ConfigMap applies within 2 s, the file unchanged; an invalid one is refused', async () => {
    expect(await limitHeader()).toBe('1000');
    const t0 = Date.now();
    await options('rate_limit_response_headers: quotas\n');
    await eventually(async () => (await limitHeader()) === undefined, 5000, 'the live option applied');
    expect(Date.now() - t0).toBeLessThan(2000);
    await options('rate_limit_response_headers: sometimes\n');
    await eventually(async () => /gateway config file refused/.test(s.out()), 5000, 'the bad options refused');
    expect(s.out()).toMatch(/ConfigMap .*gw-sidecar-config config\.yaml: .*rate_limit_response_headers/);
    expect(await limitHeader()).toBeUndefined();
    await options('rate_limit_response_headers: rate_limits\n');
    await eventually(async () => (await limitHeader()) === '1000', 5000, 'back to rate_limits');
    expect(s.proc.exitCode).toBeNull();
  }, 30_000);
});
