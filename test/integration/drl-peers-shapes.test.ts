/**
 * docs/contract.md#drl-bounds's promise of the DRL across peers joining, dying and living in other groups, with real
 * processes on one Redis, admissions counted by the upstreams' own receive times (upstreams in processes of
 * their own, recorder-process.ts):
 *   a peer SIGKILLed mid-run and a peer joining mid-run (gw standalone processes): the upper bound over
 *   any 3 × per from the first request, the lower bound once 2 heartbeats have passed after the event;
 *   a key's global limit reached through two APIs served by sidecars of two different --group (gw
 *   sidecar processes): one allowance for the key, not one per group.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { sha256hex } from '../../lib/hash.js';
import { RedisSessionStore } from '../../stores/sessions-redis.js';
import { freshNamespace } from '../helpers/kube.js';
import { freshRedis, redisUrl } from '../helpers/redis.js';
import { configOf, startSidecar, writeConfigMap, type Sidecar } from '../helpers/sidecar.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { drive, maxInAnySpan, merged, sleep, windows } from '../helpers/drl-traffic.js';
import { startRecorderProcess, type ProcessRecorder } from '../helpers/recorder-process.js';

const HEARTBEAT_S = 1;
const options = `drl_threshold: 0\ndrl_notification_frequency: ${HEARTBEAT_S}\nkv_deadline_ms: 3000\n`;

const api = (name: string, upstream: string, rate: number, per: number): string =>
  `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /${name}/, target_url: '${upstream}/${name}', strip_listen_path: true}\n  global_rate_limit: {rate: ${rate}, per: ${per}}\n`;

/** Violations of the upper bound over the run and the lower bound in windows `from`… of per from the first admission. */
function check(name: string, times: number[], rate: number, per: number, from: number, count: number): string[] {
  const out: string[] = [];
  const max3 = maxInAnySpan(times, 3 * per * 1000);
  if (max3 > Math.floor(1.1 * 3 * rate)) out.push(`${name}: ${max3} in a span of 3 × per`);
  const w = windows(times, times[0] ?? 0, per * 1000, from + count);
  if (w.slice(from).some((n) => n < 0.9 * rate)) out.push(`${name}: a window under 0.9 × rate: ${w.join(', ')}`);
  return out;
}

describe('DRL: peers dying and joining (gw standalone processes)', () => {
  let up: ProcessRecorder;
  let dir: string;
  let cfgDir: string;
  const gws: Standalone[] = [];
  beforeAll(async () => {
    (await freshRedis()).disconnect();
    up = await startRecorderProcess();
    dir = tempDir();
    cfgDir = tempDir('gw-drl-cfg-');
    writeFileSync(join(dir, 'kill.yaml'), api('kill', up.url, 90, 3));
    writeFileSync(join(dir, 'join.yaml'), api('join', up.url, 90, 3));
    writeFileSync(join(cfgDir, 'gw.yaml'), options);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await up?.close();
    if (dir) cleanup(dir);
    if (cfgDir) cleanup(cfgDir);
  }, 60_000);

  test('a SIGKILLed peer takes only its outstanding lease; a joining peer gets no free burst', async () => {
    const start = (): Promise<Standalone> =>
      startStandalone(
        dir,
        ['--redis', redisUrl(), '--config', join(cfgDir, 'gw.yaml')],
        {},
        { readyTimeoutMs: 45_000 },
      );
    gws.push(...(await Promise.all([start(), start(), start()])));
    const [a, b, c] = gws as [Standalone, Standalone, Standalone];
    const RUN = 12_500;
    let killed = false;
    const killer = (async () => {
      await sleep(3000);
      c.proc.kill('SIGKILL');
      killed = true;
    })();
    // the joining peer: started at 3 s, it takes a third of the join traffic from when it is ready
    const joiner = (async () => {
      await sleep(3000);
      const t = Date.now();
      const d = await start();
      gws.push(d);
      return drive({ origin: d.gateway, path: '/join/x', rate: 20, ms: Math.max(0, RUN - (Date.now() - t) - 3000) });
    })();
    const runs = await Promise.all([
      drive({ origin: a.gateway, path: '/kill/x', rate: 20, ms: RUN }),
      drive({ origin: b.gateway, path: '/kill/x', rate: 20, ms: RUN }),
      drive({ origin: c.gateway, path: '/kill/x', rate: 20, ms: RUN }, () => killed),
      drive({ origin: a.gateway, path: '/join/x', rate: 30, ms: RUN }),
      drive({ origin: b.gateway, path: '/join/x', rate: 30, ms: RUN }),
    ]);
    await killer;
    const joined = await joiner;
    await up.sync();
    const bad = [
      // kill at 3 s: converged again 2 heartbeats later, so from the window [6 s, 9 s)
      ...check('kill', up.times('kill'), 90, 3, 2, 1),
      ...check('join', up.times('join'), 90, 3, 2, 1),
    ];
    if (bad.length) console.log(runs.map((r) => `${r.ok}/${r.refused}/${r.other}`).join('; '), joined.ok);
    expect(bad).toEqual([]);
    expect(joined.ok + joined.refused).toBeGreaterThan(0); // the joiner served (and was counted in the one allowance)
  }, 120_000);
});

describe("DRL: a key's global limit through two APIs served by sidecars of two different groups", () => {
  let ns: string;
  let ups: ProcessRecorder[] = [];
  let sc: Sidecar[] = [];
  const KEY = 'drl-groups-key-0123456789';

  beforeAll(async () => {
    ns = await freshNamespace('drl-groups');
    const r = await freshRedis();
    const sessions = new RedisSessionStore(r, pino({ level: 'silent' }));
    await sessions.put(sha256hex(KEY), { namespace: ns, session: { rate: 60, per: 3 } });
    r.disconnect();
    await writeConfigMap(
      ns,
      configOf(ns, [
        { name: 'ka', path: '/ka/', rate: 100000, per: 1, keyless: false },
        { name: 'kb', path: '/kb/', rate: 100000, per: 1, keyless: false },
      ]),
    );
    ups = await Promise.all([startRecorderProcess(), startRecorderProcess()]);
    sc = await Promise.all(
      ['g1', 'g2'].map((group, i) => startSidecar({ ns, upstream: ups[i]!.url, redis: redisUrl(), group, options })),
    );
  }, 90_000);
  afterAll(async () => {
    await Promise.all(sc.map((s) => s.stop()));
    await Promise.all(ups.map((u) => u.close()));
  }, 60_000);

  test('one allowance for the key: the two groups together keep the bounds of its limit', async () => {
    const headers = { authorization: KEY };
    const runs = await Promise.all([
      drive({ origin: sc[0]!.gw, path: '/ka/x', rate: 20, ms: 9500, headers }),
      drive({ origin: sc[1]!.gw, path: '/kb/x', rate: 20, ms: 9500, headers }),
    ]);
    await Promise.all(ups.map((u) => u.sync()));
    const times = merged(ups[0]!.all(), ups[1]!.all());
    const bad = check('two groups', times, 60, 3, 1, 2);
    if (bad.length) console.log(runs.map((r) => `${r.ok}/${r.refused}/${r.other}`).join('; '));
    expect(bad).toEqual([]);
    // both groups admitted part of it (the leases follow demand, not the group)
    expect(ups[0]!.all().length).toBeGreaterThan(0);
    expect(ups[1]!.all().length).toBeGreaterThan(0);
    // each group alone would have admitted the whole limit: together they admitted it once
    expect(runs[0]!.ok + runs[1]!.ok).toBeLessThanOrEqual(Math.floor(1.1 * 4 * 60));
  }, 60_000);
});
