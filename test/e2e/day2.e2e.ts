/**
 * Day-2 operations on the one-node cluster (`make e2e`, after cluster.e2e.ts): scaling the application,
 * a rolling update, a sidecar's SIGTERM, a slow app holding many connections (node pressure), the
 * controller leader deleted, Redis deleted, `helm upgrade` of config and image, the webhook down. Every scenario runs under steady load through the application's Service (the test
 * process sends it from the cluster's network namespace; every response is recorded, timed by the test's
 * clock) and checks that no request fails and that the DRL's limit holds per window. Figures are printed
 * as `e2e-figure:` lines (docs/operator.md, "Day 2 on a real cluster"). Runs in order: each scenario
 * leaves the release and the application as the next one expects them.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  APP_NS,
  CHART,
  GW_NS,
  HELM,
  IMAGE,
  KUBECTL,
  LOAD_NS,
  DRL,
  MB,
  SIDECAR_LIMIT,
  type Pod,
  type Sample,
  admittedPerWindow,
  cgroupLimit,
  clusterIP,
  eventually,
  exitTime,
  failures,
  figure,
  followLogs,
  helm,
  installRelease,
  kjson,
  kubectl,
  leaseHolder,
  perPod,
  pods,
  ready,
  run,
  sleep,
  steadyLoad,
  tally,
  values,
  workingSet,
} from './kube-tools.js';
import { Redis } from 'ioredis';
import {
  DAY2_APP,
  DAY2_HEADERS_RESOURCES,
  DAY2_RATE,
  DAY2_RESOURCES,
  KEY_DAY2,
  KEY_HEADERS,
  RESOURCES,
  accessKey,
} from './fixtures.js';

const RUN = process.env.GW_E2E_RUN ?? '/var/lib/gw-e2e';
const WINDOW_MS = DAY2_RATE.per * 1000;
const LOW = Math.ceil(0.9 * DAY2_RATE.rate);
const HIGH = Math.floor(1.1 * DAY2_RATE.rate);
const CONFIG = { ...DRL, kv_failure_mode: 'open' };
const UPGRADED = { ...DRL, kv_failure_mode: 'closed', rate_limit_response_headers: 'quotas' };
const TAG2 = `${IMAGE.split(':')[1]}2`;

let svc = '';
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** Slow requests of the node-pressure scenario: held connections (the per-client cap of a listener is 1,024). */
const HOLD = 900;
const HOLD_MS = 25_000;

/** `n` requests to `url` at once, each on its own connection; resolves with their samples when all ended. */
async function holdRequests(url: string, n: number): Promise<Sample[]> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const one = (): Promise<Sample> =>
    new Promise((resolve) => {
      const sent = Date.now();
      const done = (status: number, err?: string): void =>
        resolve({ t: Date.now(), ms: Date.now() - sent, status, err });
      const req = http.get(url, { agent, timeout: HOLD_MS + 20_000 }, (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode ?? 0));
        res.on('error', (e: NodeJS.ErrnoException) => done(0, `response ${e.code ?? e.message}`));
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.on('error', (e: NodeJS.ErrnoException) => done(0, e.code ?? e.message));
    });
  const out = await Promise.all(Array.from({ length: n }, one));
  agent.destroy();
  return out;
}

/** The two streams every scenario runs: the DRL key on fresh connections, a keyless API on keep-alive ones. */
function streams(): { limited: ReturnType<typeof steadyLoad>; open: ReturnType<typeof steadyLoad>; t0: number } {
  const t0 = Date.now();
  return {
    t0,
    // 20 per second, twice the key's rate: every window is over its limit
    limited: steadyLoad(`${svc}/echo/day2`, { rps: 20, fresh: true, headers: { authorization: KEY_DAY2 } }),
    open: steadyLoad(`${svc}/open/day2`, { rps: 20, connections: 8 }),
  };
}

/** Stops both streams, prints the scenario's figures and checks: no failed request, the DRL's windows. */
async function settle(
  name: string,
  s: ReturnType<typeof streams>,
  o: { windows?: boolean; allowFailures?: (x: Sample) => boolean } = {},
): Promise<{ limited: Sample[]; open: Sample[] }> {
  const limited = await s.limited.stop();
  const open = await s.open.stop();
  const windows = admittedPerWindow(limited, s.t0, WINDOW_MS);
  figure(`${name}: limited stream`, `${JSON.stringify(tally(limited))}; pods ${JSON.stringify(perPod(limited))}`);
  figure(`${name}: keep-alive stream`, `${JSON.stringify(tally(open))}; pods ${JSON.stringify(perPod(open))}`);
  figure(`${name}: DRL admitted per ${DAY2_RATE.per} s window (rate ${DAY2_RATE.rate})`, windows.join(' '));
  const failed = [...failures(limited), ...failures(open)].filter((x) => !o.allowFailures?.(x));
  assert.deepEqual(
    failed
      .slice(0, 20)
      .map(
        (x) =>
          `${new Date(x.t).toISOString()} ${x.status || x.err}${x.idleMs === undefined ? '' : ` (a reused connection, idle ${x.idleMs} ms)`}`,
      ),
    [],
    `${name}: ${failed.length} failed requests`,
  );
  if (o.windows !== false) {
    assert.ok(windows.length >= 3, `${name}: ${windows.length} windows`);
    for (const [i, w] of windows.entries())
      assert.ok(w >= LOW && w <= HIGH, `${name}: window ${i} admitted ${w}, not within ${LOW}–${HIGH}`);
  }
  return { limited, open };
}

/**
 * Once only `n` echo pods are left (the terminating ones gone), reports the time since `since` as
 * `figureName`, lets the streams run `tailMs` more, then settles them as `name`.
 */
async function settleAt(
  n: number,
  figureName: string,
  since: number,
  tailMs: number,
  name: string,
  s: ReturnType<typeof streams>,
): Promise<void> {
  await eventually(120, `only ${n} pods left`, async () =>
    (await pods(APP_NS, 'app=echo')).length === n ? true : undefined,
  );
  figure(figureName, secs(Date.now() - since));
  await sleep(tailMs);
  await settle(name, s);
}

async function readyCount(): Promise<number> {
  return (await pods(APP_NS, 'app=echo')).filter((p) => ready(p) && !isTerminating(p)).length;
}
const isTerminating = (p: Pod): boolean =>
  (p as Pod & { metadata: { deletionTimestamp?: string } }).metadata.deletionTimestamp !== undefined;

/** The application as each scenario starts from: 3 pods Ready, each seeing 3 DRL peers. */
async function threePods(): Promise<void> {
  await kubectl(['-n', APP_NS, 'scale', 'deployment/echo', '--replicas=3']);
  await appSettled(3);
}

/** Every echo pod answers the day-2 key directly, and its sidecar sees `n` DRL peers. */
async function appSettled(n: number): Promise<void> {
  await eventually(120, `${n} echo pods Ready, nothing terminating`, async () => {
    const ps = await pods(APP_NS, 'app=echo');
    return ps.length === n && ps.every((p) => ready(p) && !isTerminating(p)) ? true : undefined;
  });
  await eventually(60, `${n} DRL peers on every sidecar`, async () => {
    const ps = await pods(APP_NS, 'app=echo');
    const peers = await Promise.all(
      ps.map(async (p) => {
        const text = await (await fetch(`http://${p.status.podIP}:15090/metrics`)).text();
        return Number(/^gw_drl_peers (\S+)$/m.exec(text)?.[1]);
      }),
    );
    return peers.every((x) => x === n) ? true : undefined;
  });
}

/** A pod for admission checks: the echo app with the inject annotation and a named port. */
const probePod = (name: string, ns = APP_NS): string => `
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: ${ns}, labels: {day2: admission}, annotations: {gw.io/inject: "true"}}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 10002}
  containers:
    - name: echo
      image: localhost/gw-test/echo:1
      imagePullPolicy: IfNotPresent
      ports: [{name: http, containerPort: 8080}]
      resources: {requests: {cpu: 5m, memory: 32Mi}, limits: {memory: 96Mi}}
      securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`;

/** A pod through admission without creating it (`--dry-run=server`: the webhooks run, nothing is stored). */
async function admit(name: string, ns = APP_NS): Promise<{ err?: string; sidecar?: boolean }> {
  const r = await run(KUBECTL, ['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: probePod(name, ns) });
  if (r.code !== 0) return { err: r.stderr.trim() };
  const p = JSON.parse(r.stdout) as Pod;
  return { sidecar: p.spec.containers.some((c) => c.name === 'gw-sidecar') };
}

/** The X-RateLimit-Limit a pod's sidecar answers for the headers key: its rate, or its quota with `quotas`. */
async function headerOf(p: Pod): Promise<string | undefined> {
  const r = await fetch(`http://${p.status.podIP}:15080/echo/header`, { headers: { authorization: KEY_HEADERS } });
  await r.arrayBuffer();
  return r.headers.get('x-ratelimit-limit') ?? undefined;
}

/** When a ConfigMap was last written by helm (epoch ms, the API server's managedFields time: whole seconds). */
async function configMapWritten(ns: string, name: string): Promise<number> {
  const cm = await kjson<{ metadata: { managedFields?: { manager?: string; time?: string }[] } }>([
    '-n',
    ns,
    'get',
    'configmap',
    name,
    '--show-managed-fields',
  ]);
  const times = (cm.metadata.managedFields ?? [])
    .filter((f) => f.manager?.startsWith('helm') && f.time)
    .map((f) => Date.parse(f.time!));
  assert.ok(times.length, `${ns}/${name}: no write by helm in its managedFields`);
  return Math.max(...times);
}

async function deletePod(ns: string, name: string): Promise<number> {
  const t = Date.now();
  await kubectl(['-n', ns, 'delete', 'pod', name, '--wait=false']);
  return t;
}

async function redisPod(): Promise<Pod> {
  const ps = await pods(GW_NS, 'app.kubernetes.io/component=redis');
  const p = ps.find((x) => !isTerminating(x));
  assert.ok(p, 'a Redis pod');
  return p;
}

/**
 * Deletes the Redis pod; resolves with the deletion time, the time its replacement was Ready, and what a
 * client of the Service saw meanwhile (polled every 100 ms): the first PING answered, the first time the
 * controller's marker read `ready:` again (its sessions restored, docs/operator.md "Drift repair").
 */
async function bounceRedis(): Promise<{ deleted: number; readyAt: number; pingAt?: number; markerAt?: number }> {
  const secret = await kjson<{ data: Record<string, string> }>(['get', 'secret', '-n', GW_NS, 'gw-redis-password']);
  const client = new Redis({
    host: await clusterIP(GW_NS, 'gw-redis'),
    password: Buffer.from(secret.data.password!, 'base64').toString(),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => 100,
    connectTimeout: 500,
  });
  client.on('error', () => undefined);
  await client.connect().catch(() => undefined);
  const old = await redisPod();
  const deleted = await deletePod(GW_NS, old.metadata.name);
  let pingAt: number | undefined;
  let markerAt: number | undefined;
  let polling = true;
  const poller = (async () => {
    await sleep(500); // the old server's answers first
    while (polling && markerAt === undefined) {
      try {
        if ((await client.ping()) === 'PONG') pingAt ??= Date.now();
        const keys = await client.keys('gw:controller:marker:*');
        const vals = keys.length ? await client.mget(...keys) : [];
        if (vals.some((v) => v?.startsWith('ready:'))) markerAt = Date.now();
      } catch {
        // not there yet
      }
      await sleep(100);
    }
  })();
  const readyAt = await eventually(120, 'a new Redis pod Ready', async () => {
    const p = (await pods(GW_NS, 'app.kubernetes.io/component=redis')).find(
      (x) => x.metadata.name !== old.metadata.name && ready(x),
    );
    return p ? Date.now() : undefined;
  });
  await eventually(20, 'the marker back', async () => (markerAt !== undefined ? true : undefined)).catch(
    () => undefined,
  );
  polling = false;
  await poller;
  client.disconnect();
  if (pingAt) figure('Redis: deletion → PING answered through the Service', secs(pingAt - deleted));
  if (markerAt) figure('Redis: deletion → marker ready (sessions restored)', secs(markerAt - deleted));
  return { deleted, readyAt, pingAt, markerAt };
}

/** From 3 pods, the streams running: the Redis pod deleted after 5 s; the streams go on 10 s after its replacement is Ready. */
async function redisDeletedUnderLoad(mode: string): Promise<{ s: ReturnType<typeof streams>; readyAt: number }> {
  await threePods();
  const s = streams();
  await sleep(5_000);
  const { deleted, readyAt } = await bounceRedis();
  figure(`Redis (${mode}): deletion → new pod Ready`, secs(readyAt - deleted));
  await sleep(10_000);
  return { s, readyAt };
}

describe('day 2 on a one-node cluster', { concurrency: false }, () => {
  before(async () => {
    for (const ns of [APP_NS, LOAD_NS]) await kubectl(['create', 'namespace', ns]);
    await kubectl(['label', 'namespace', APP_NS, 'gw.io/injection=enabled']);
    await installRelease(CONFIG);
    await kubectl(['apply', '-f', '-'], [RESOURCES, DAY2_RESOURCES, DAY2_HEADERS_RESOURCES].join('\n---\n'));
    await kubectl(['apply', '-f', '-'], DAY2_APP);
    await kubectl(['-n', APP_NS, 'rollout', 'status', 'deployment/echo', '--timeout=240s'], undefined, 250_000);
    svc = `http://${await clusterIP(APP_NS, 'echo')}`;
    await eventually(60, 'the day-2 key served by every pod', async () => {
      const ps = await pods(APP_NS, 'app=echo');
      const hs = await Promise.all(ps.map(headerOf));
      return hs.every((h) => h === '1000') ? true : undefined;
    });
    await appSettled(3);
  });
  after(async () => {
    // gw's resources while the controller still runs (their finalizers), then the release
    await run(
      KUBECTL,
      ['-n', APP_NS, 'delete', 'accesskeys,oauthclients,apidefinitions,policies', '--all', '--timeout=60s'],
      {
        timeoutMs: 70_000,
      },
    );
    await run(HELM, ['uninstall', 'gw', '-n', GW_NS, '--wait', '--timeout', '60s'], { timeoutMs: 90_000 });
    await run(KUBECTL, ['delete', 'namespace', APP_NS, LOAD_NS, '--wait=false']);
  });

  test('scale 3 → 6 → 2 under load: no failed request, the DRL within 0.9–1.1 × rate per window', async () => {
    await threePods();
    const s = streams();
    await sleep(12_000);
    await kubectl(['-n', APP_NS, 'scale', 'deployment/echo', '--replicas=6']);
    await eventually(120, '6 Ready', async () => ((await readyCount()) === 6 ? true : undefined));
    figure('scale: 3 → 6 Ready after', secs(Date.now() - s.t0 - 12_000));
    await sleep(15_000);
    const down = Date.now();
    await kubectl(['-n', APP_NS, 'scale', 'deployment/echo', '--replicas=2']);
    await settleAt(2, 'scale: 6 → 2, the 4 pods gone after', down, 15_000, 'scale 3→6→2', s);
  });

  test('rolling update (maxUnavailable 0) under load: no failed request, the DRL within bounds', async () => {
    await threePods();
    const s = streams();
    await sleep(8_000);
    const t = Date.now();
    await kubectl([
      '-n',
      APP_NS,
      'patch',
      'deployment/echo',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { template: { metadata: { annotations: { 'day2/revision': String(t) } } } } }),
    ]);
    await kubectl(['-n', APP_NS, 'rollout', 'status', 'deployment/echo', '--timeout=240s'], undefined, 250_000);
    await settleAt(3, 'rolling update: 3 pods replaced in', t, 10_000, 'rolling update', s);
  });

  test('a terminating sidecar with idle keep-alive clients exits as soon as its drain is done', async () => {
    await threePods();
    const [victim] = await pods(APP_NS, 'app=echo');
    assert.ok(victim);
    // 4 keep-alive connections straight to the pod's sidecar, one request each, then idle
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const closedAt: number[] = [];
    agent.on('free', (socket: import('node:net').Socket) => {
      if (!(socket as { day2?: boolean }).day2) {
        (socket as { day2?: boolean }).day2 = true;
        socket.once('close', () => closedAt.push(Date.now()));
      }
    });
    await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<void>((resolve, reject) =>
            http
              .get(`http://${victim.status.podIP}:15080/open/idle`, { agent }, (res) => {
                res.resume();
                res.on('end', () => resolve());
              })
              .on('error', reject),
          ),
      ),
    );
    const logs = followLogs(APP_NS, victim.metadata.name, 'gw-sidecar');
    await sleep(1000);
    const deleted = await deletePod(APP_NS, victim.metadata.name);
    const exited = await exitTime(victim, 'gw-sidecar', 60);
    logs.stop();
    agent.destroy();
    const at = (msg: string): number | undefined => {
      const line = logs.lines.find((l) => l.includes(msg));
      return line ? (JSON.parse(line) as { time: number }).time : undefined;
    };
    const preStop = at('preStop: closing connections');
    const sigterm = at('"shutting down"');
    assert.ok(sigterm, `the sidecar logged its SIGTERM: ${logs.lines.slice(-5).join(' | ')}`);
    if (preStop) {
      figure('sidecar: deletion → preStop hook', secs(preStop - deleted));
      figure('sidecar: preStop hook → SIGTERM (the drain delay)', secs(sigterm - preStop));
    } else figure('sidecar: deletion → SIGTERM (no preStop hook)', secs(sigterm - deleted));
    figure('sidecar: SIGTERM → exit', secs(exited - sigterm));
    // idle through the hook's hold, they end by the server's keep-alive timeout (5 s) or at SIGTERM
    figure(
      'sidecar: the 4 idle keep-alive connections (opened 1 s before the deletion) closed, relative to SIGTERM',
      closedAt.map((c) => secs(c - sigterm)).join(', ') || 'none seen',
    );
    assert.ok(exited - sigterm < 3000, `SIGTERM → exit took ${exited - sigterm} ms`);
  });

  test('node pressure: a sidecar whose app is slow holds 900 connections within its memory limit and keeps serving others', async () => {
    await threePods();
    const [victim] = await pods(APP_NS, 'app=echo');
    assert.ok(victim);
    const side = `http://${victim.status.podIP}:15080`;
    const limit = cgroupLimit(victim, 'gw-sidecar');
    assert.ok(limit && limit <= SIDECAR_LIMIT, `the sidecar's cgroup limit ${limit}`);
    const before = workingSet(victim, 'gw-sidecar') ?? 0;
    let peak = before;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, workingSet(victim, 'gw-sidecar') ?? 0);
        await sleep(250);
      }
    })();
    // the slow requests: each holds its connection to the sidecar and the sidecar's to the app for HOLD_MS
    const t0 = Date.now();
    const slow = holdRequests(`${side}/open/slow?delay=${HOLD_MS}`, HOLD);
    await sleep(3000);
    // another client meanwhile: 20 requests a second on 4 keep-alive connections, for most of the hold
    const others = await (async () => {
      const l = steadyLoad(`${side}/open/fast`, { rps: 20, connections: 4 });
      await sleep(HOLD_MS - 8000);
      return l.stop();
    })();
    const held = await slow;
    sampling = false;
    await sampler;
    const after = (await pods(APP_NS, 'app=echo')).find((p) => p.metadata.name === victim.metadata.name);
    const status = after?.status.containerStatuses?.find((c) => c.name === 'gw-sidecar');
    const ms = others.map((x) => x.ms).sort((a, b) => a - b);
    const q = (f: number): string => `${ms[Math.min(ms.length - 1, Math.floor(f * ms.length))] ?? '-'} ms`;
    figure(
      `node pressure: ${HOLD} slow requests (the app answers after ${secs(HOLD_MS)})`,
      JSON.stringify(tally(held)),
    );
    figure(
      'node pressure: slow requests answered after',
      `${secs(Math.min(...held.map((x) => x.t)) - t0)} – ${secs(Math.max(...held.map((x) => x.t)) - t0)}`,
    );
    figure(
      'node pressure: another client meanwhile',
      `${JSON.stringify(tally(others))}; latency p50 ${q(0.5)}, p99 ${q(0.99)}, max ${q(1)}`,
    );
    figure('node pressure: sidecar working set', `${MB(before)} before, peak ${MB(peak)}, limit ${MB(limit)}`);
    figure(
      'node pressure: sidecar restarts',
      `${status?.restartCount ?? '?'} (last terminated: ${status?.lastState?.terminated?.reason ?? 'none'})`,
    );
    assert.deepEqual(tally(held), { 200: HOLD }, 'every slow request answered by the app');
    assert.ok(Math.min(...held.map((x) => x.t)) - t0 >= HOLD_MS, 'the slow requests were held');
    assert.deepEqual(failures(others), [], 'the other client failed meanwhile');
    assert.ok(others.length >= 0.9 * 20 * ((HOLD_MS - 8000) / 1000), `the other client got ${others.length} answers`);
    assert.ok(ms.at(-1)! < 5000, `the other client's slowest answer took ${ms.at(-1)} ms`);
    assert.ok(peak < limit, `peak working set ${MB(peak)} within the limit ${MB(limit)}`);
    assert.equal(status?.restartCount, 0, 'the sidecar restarted');
    assert.equal(status?.ready, true, 'the sidecar is Ready after the hold');
  });

  test('the controller leader deleted while AccessKeys are created: every key served, failover time', async () => {
    const controllers = (await pods(GW_NS, 'app.kubernetes.io/component=controller')).map((p) => p.metadata.name);
    const holder = await leaseHolder();
    const leader = controllers.find((c) => holder?.startsWith(c));
    assert.ok(leader, `the lease holder ${holder} is one of ${controllers.join(', ')}`);
    const created: number[] = [];
    const served: (number | undefined)[] = [];
    const keys = Array.from({ length: 20 }, (_, i) => `e2e-day2-fo-${i}-0123456789abcdef`);
    let probing = true;
    const prober = (async () => {
      while (probing) {
        await Promise.all(
          created.map(async (_, i) => {
            if (served[i] !== undefined) return;
            const r = await fetch(`${svc}/echo/fo`, {
              headers: { authorization: keys[i]!, connection: 'close' },
            }).catch(() => undefined);
            await r?.arrayBuffer();
            if (r?.status === 200) served[i] = Date.now();
          }),
        );
        await sleep(200);
      }
    })();
    let deleted = 0;
    for (let i = 0; i < keys.length; i++) {
      if (i === 5) deleted = await deletePod(GW_NS, leader);
      created[i] = Date.now();
      await kubectl(['apply', '-f', '-'], accessKey(`fo-${i}`, keys[i]!));
      await sleep(1000);
    }
    await eventually(60, 'every key served', async () =>
      served.filter((x) => x !== undefined).length === keys.length ? true : undefined,
    ).catch(() => undefined);
    probing = false;
    await prober;
    const newHolder = await leaseHolder();
    const latencies = keys.map((_, i) => (served[i] === undefined ? 'never' : secs(served[i]! - created[i]!)));
    figure('leader deleted: key create → served', latencies.join(' '));
    const after = keys.map((_, i) => i).filter((i) => created[i]! >= deleted && served[i] !== undefined);
    const first = Math.min(...after.map((i) => served[i]!));
    figure('leader deleted: deletion → first key created after it served', secs(first - deleted));
    figure('leader deleted: new lease holder', `${newHolder} (was ${holder})`);
    assert.equal(served.filter((x) => x !== undefined).length, keys.length, `served: ${latencies.join(' ')}`);
    assert.ok(first - deleted <= 20_000, `first key after the deletion served after ${first - deleted} ms`);
    await run(KUBECTL, ['-n', APP_NS, 'delete', 'accesskeys', ...keys.map((_, i) => `fo-${i}`), '--wait=false']);
  });

  test('Redis pod deleted under load, kv_failure_mode open: no failed request', async () => {
    const { s } = await redisDeletedUnderLoad('open');
    // the windows while the store is away are the even split's, not the shared counter's: reported only
    await settle('Redis deleted (open)', s, { windows: false });
  });

  test('helm upgrade of config and image under load: sidecars take the config, no failed admission or facade call', async () => {
    await threePods();
    const tag = await run('ctr', [
      '--address',
      `${RUN}/containerd/containerd.sock`,
      '-n',
      'k8s.io',
      'images',
      'tag',
      '--force',
      IMAGE,
      `${IMAGE.split(':')[0]}:${TAG2}`,
    ]);
    assert.equal(tag.code, 0, `ctr images tag: ${tag.stderr}`);
    const running = (await pods(APP_NS, 'app=echo')).filter(ready);
    const creds = await kjson<{ items: { data?: Record<string, string> }[] }>(['get', 'secrets', '-n', GW_NS]);
    const secret = Buffer.from(
      creds.items.find((x) => x.data?.secret && x.data?.access_tokens)!.data!.secret!,
      'base64',
    ).toString();
    const facadeUrl = `http://${await clusterIP(GW_NS, 'gw-facade')}:8081/gw/keys`;
    // a connection per call, as `gw keys` in a CI job makes them
    const facade = steadyLoad(facadeUrl, { rps: 5, fresh: true, headers: { 'x-gw-authorization': secret } });
    // and a keep-alive client: the terminating facade's preStop notice makes it reconnect before the
    // drain closes its idle connections (docs/helm.md, "Termination")
    const facadeKept = steadyLoad(facadeUrl, { rps: 5, connections: 2, headers: { 'x-gw-authorization': secret } });
    const s = streams();
    // a pod admitted every second during the upgrade (server-side dry run: the webhook runs, nothing starts)
    const admissions: { name: string; err?: string; sidecar?: boolean }[] = [];
    let creating = true;
    const creator = (async () => {
      for (let i = 0; creating; i++) {
        const name = `upgrade-${i}`;
        const r = await admit(name);
        admissions.push({ name, err: r.err, sidecar: r.sidecar });
        await sleep(1000);
      }
    })();
    const t = Date.now();
    const seen = new Map<string, number>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        for (const p of running)
          if (!seen.has(p.metadata.name) && (await headerOf(p).catch(() => undefined)) === String(DAY2_RATE.quota_max))
            seen.set(p.metadata.name, Date.now());
        await sleep(250);
      }
    })();
    await helm(['upgrade', 'gw', CHART, '-n', GW_NS, '-f', values(UPGRADED, TAG2), '--wait', '--timeout', '5m']);
    figure('helm upgrade --wait (config + image tag)', secs(Date.now() - t));
    // the streams go on past the rollout's end: the DRL's windows through it and after
    await eventually(150, 'every running sidecar with the new config', async () =>
      seen.size === running.length ? true : undefined,
    ).catch(() => undefined);
    await sleep(Math.max(0, t + 3 * WINDOW_MS + 2000 - Date.now()));
    watching = false;
    await watcher;
    creating = false;
    await creator;
    const facadeSamples = await facade.stop();
    const facadeKeptSamples = await facadeKept.stop();
    // when helm wrote the sidecars' ConfigMap, by the API server's clock (whole seconds, rounded down:
    // the latencies below are at most 1 s longer than they were); helm's own start before it is reported
    const written = await configMapWritten(APP_NS, 'gw-sidecar-config');
    figure('helm upgrade: helm started → gw-sidecar-config written', secs(written - t));
    figure(
      'helm upgrade: gw-sidecar-config written → running sidecars took the config',
      [...seen.values()].map((x) => secs(x - written)).join(', '),
    );
    figure('helm upgrade: facade calls, a connection each', JSON.stringify(tally(facadeSamples)));
    figure('helm upgrade: facade calls, 2 keep-alive connections', JSON.stringify(tally(facadeKeptSamples)));
    const withSidecar = admissions.filter((a) => a.sidecar);
    for (const a of admissions.filter((x) => x.err)) figure(`helm upgrade: admission of ${a.name} refused`, a.err!);
    figure(
      'helm upgrade: pods admitted during it (server-side dry run)',
      `${admissions.length}, refused ${admissions.filter((a) => a.err).length}, with the sidecar ${withSidecar.length}`,
    );
    await settle('helm upgrade', s);
    assert.deepEqual(
      admissions.filter((a) => a.err),
      [],
      'admission refused during the upgrade',
    );
    assert.equal(withSidecar.length, admissions.length, 'every pod created during the upgrade has its sidecar');
    assert.deepEqual(failures(facadeSamples), [], 'facade calls failed during the upgrade');
    assert.deepEqual(
      failures(facadeKeptSamples).map(
        (x) => `${x.status || x.err}${x.idleMs === undefined ? '' : ` (idle ${x.idleMs} ms)`}`,
      ),
      [],
      'keep-alive facade calls failed during the upgrade',
    );
    for (const c of ['controller', 'facade', 'webhook']) {
      const ps = await pods(GW_NS, `app.kubernetes.io/component=${c}`);
      for (const p of ps.filter((x) => !isTerminating(x)))
        assert.equal(p.spec.containers[0]!.image, `${IMAGE.split(':')[0]}:${TAG2}`, p.metadata.name);
    }
    assert.equal(seen.size, running.length, `sidecars with the new config: ${[...seen.keys()].join(', ')}`);
    for (const [pod, at] of seen)
      assert.ok(at - written <= 10_000, `${pod} took the config ${at - written} ms after the ConfigMap's write`);
  });

  test('Redis pod deleted under load, kv_failure_mode closed: the 503s stop within 2 s of Redis Ready, sessions restored', async () => {
    const { s, readyAt } = await redisDeletedUnderLoad('closed');
    const { limited, open } = await settle('Redis deleted (closed)', s, {
      windows: false,
      allowFailures: (x) => x.status === 503,
    });
    const all = [...limited, ...open];
    const last503 = Math.max(0, ...all.filter((x) => x.status === 503).map((x) => x.t));
    figure(
      'Redis (closed): 503s',
      `${all.filter((x) => x.status === 503).length}; last ${last503 ? secs(last503 - readyAt) : '-'} after Ready`,
    );
    if (last503) assert.ok(last503 - readyAt <= 2000, `503s until ${last503 - readyAt} ms after Redis Ready`);
    // sessions restored: the key is admitted again after the store came back
    assert.ok(
      limited.some((x) => x.t > readyAt + 2000 && x.status === 200),
      'the key served after Redis came back',
    );
  });

  test('webhook scaled to 0: failurePolicy Fail refuses an annotated pod in an opted-in namespace, nowhere else', async () => {
    await kubectl(['-n', GW_NS, 'scale', 'deployment/gw-webhook', '--replicas=0']);
    await eventually(60, 'no webhook pod', async () =>
      (await pods(GW_NS, 'app.kubernetes.io/component=webhook')).length === 0 ? true : undefined,
    );
    const refused = await admit('webhook-down');
    figure('webhook down: pod in the opted-in namespace', refused.err ?? 'admitted');
    const elsewhere = await admit('webhook-down', LOAD_NS);
    await kubectl(['-n', GW_NS, 'scale', 'deployment/gw-webhook', '--replicas=2']);
    await kubectl(['-n', GW_NS, 'rollout', 'status', 'deployment/gw-webhook', '--timeout=120s'], undefined, 130_000);
    assert.ok(refused.err, 'the annotated pod was admitted while the webhook was down');
    assert.match(refused.err, /webhook/);
    assert.equal(elsewhere.err, undefined, 'a pod outside the opted-in namespaces is admitted');
    assert.equal(elsewhere.sidecar, false);
    // back up: the same pod is admitted with its sidecar
    const t = Date.now();
    const back = await eventually(60, 'admitted once the webhook is back', async () => {
      const r = await admit('webhook-down');
      return r.err === undefined ? r : undefined;
    });
    assert.equal(back.sidecar, true);
    figure('webhook back: first admission after Ready', secs(Date.now() - t));
  });
});
