/**
 * The keyless stream intake under attack, in a real `gw standalone` process with the V8 heap flags an
 * injected sidecar gets for the chart's 256 MiB memory limit (--max-old-space-size=153, webhook/node-options.ts):
 * the examples/06-streams.yaml shape (intake 20/s for everyone, partner 2/s), 4 small events, then 1 MB
 * bodies of 500,000 nested arrays (each had been accepted and held ~25 MB of heap: the process died with
 * "Reached heap limit" after 6), then 1 MB flat JSON bodies at 19/s, inside the API's limit, for 6 s.
 * Deep bodies → 400; flat ones → 202 until the stream's 16 MiB byte bound, then 503; the process stays
 * up, its RSS under 256 MiB, and a refused body is not read (the bytes the process reads, from /proc).
 * Another API is probed on this process throughout, and on a twin process nobody attacks (the control): its
 * p99 during the attack stays under 50 ms. The attack is sent by a process of its own, at ordinary priority
 * (test/helpers/intake-attacker.ts), and the test runs alone (`npm run test:alone`, jest.config.js).
 * GW_INTAKE_REPORT=<file> writes the figures (latencies, each process's event-loop delay, CPU) as JSON.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getPriority } from 'node:os';
import { prioritiseThreads } from '../../helpers/priority.js';
import { Agent, request } from 'undici';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { startEchoProcess } from '../../helpers/echo-process.js';
import { attackIntake, CUT, postEventTo } from '../../helpers/stream-intake.js';
import { p99 } from '../../helpers/steady-load.js';
import { sleep } from './helpers.js';

/** CPU time (ms) of a process's main thread and of all its threads, from /proc. */
const cpuMs = (pid: number): { main: number; all: number } => {
  const ticks = (stat: string) => {
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, at 100 ticks/s
  };
  return {
    main: ticks(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8')),
    all: ticks(readFileSync(`/proc/${pid}/stat`, 'utf8')),
  };
};

/** Bytes the process has read with read(2) and its kind (sockets included), from /proc. */
const readBytes = (pid: number): number => Number(/rchar:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))![1]);

const rssMiB = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('a keyless stream intake under attack', () => {
  let rx: { url: string; pid: number; stop: () => void };
  let gw: Standalone;
  let control: Standalone;
  let dir: string;
  let controlDir: string;
  let prioritised = false;
  let ownPriority = 0;
  beforeAll(async () => {
    rx = await startEchoProcess(); // its own process: the latencies measured are the gateway's
    dir = tempDir('gw-hostile-intake-');
    writeFileSync(
      join(dir, 'events.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: events}
spec:
  use_keyless: true
  proxy: {listen_path: /events/, target_url: '${rx.url}'}
  global_rate_limit: {rate: 20, per: 1}
  streaming:
    rate_limit_resources: [{label: partner, local: {count: 2, interval: 1s}}]
    streams:
      intake:
        input: {http_server: {path: /in}}
        pipeline:
          processors:
            - mapping: {move: {user.id: customer_id}, set: {source: gw}, delete: [debug]}
        output: {http_client: {url: '${rx.url}/partner/events', rate_limit: partner}}
---
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: other}
spec:
  use_keyless: true
  proxy: {listen_path: /other/, target_url: '${rx.url}'}
`,
    );
    controlDir = tempDir('gw-hostile-intake-control-');
    writeFileSync(join(controlDir, 'events.yaml'), readFileSync(join(dir, 'events.yaml')));
    const heapFlags = ['--max-old-space-size=153', '--max-semi-space-size=8'];
    control = await startStandalone(controlDir, [], {}, { nodeArgs: heapFlags });
    gw = await startStandalone(
      dir,
      [],
      {},
      {
        nodeArgs: [
          ...heapFlags,
          // measuring aid: e.g. GW_INTAKE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' or '--trace-gc'
          ...(process.env.GW_INTAKE_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
        ],
      },
    );
    // every process of the measurement ahead of the attack's sender and the machine's other work, where the
    // test may (root or CAP_SYS_NICE): both gateways, the upstream, and this worker, which times the probes
    // (each of their threads, V8's GC helpers too; a gateway's body thread stays below its others:
    // test/helpers/priority.ts)
    ownPriority = getPriority();
    prioritised = [gw.proc.pid!, control.proc.pid!, rx.pid, process.pid]
      .map((pid) => prioritiseThreads(pid, -10))
      .every(Boolean);
  });
  afterAll(async () => {
    prioritiseThreads(process.pid, ownPriority); // not raised: moves nothing
    await gw?.stop();
    await control?.stop();
    rx?.stop();
    cleanup(dir);
    cleanup(controlDir);
  });

  const post = (body: string | Buffer): Promise<number> => postEventTo(gw.gateway, body);

  test('deep bodies are refused (400), the byte bound answers 503, refused bodies are not read, the process stays up and within its memory', async () => {
    const small = [];
    for (let i = 0; i < 4; i++) small.push(await post(JSON.stringify({ user: { id: `u${i}` }, debug: true })));
    expect(small).toEqual([202, 202, 202, 202]);

    const deep = Buffer.from(`{"user":{"id":${'['.repeat(500_000)}${']'.repeat(500_000)}}}`);
    const deepStatus = [];
    for (let i = 0; i < 6; i++) deepStatus.push(await post(deep));
    expect(deepStatus.filter((x) => x !== 400 && x !== CUT)).toEqual([]);
    expect(deepStatus).toContain(400);

    // another API, on this process and on a twin process nobody attacks (the control: the same machine
    // at the same moments, so a loaded machine raises both), probed in turns: alone first, then while 1 MB
    // bodies (flat, and every sixth deep) arrive at 19/s for 6 s
    // the probes' own connections: on the pool of the attack's POSTs they would queue behind 1 MB uploads
    // in this client, which is no latency of the gateway
    const prober = new Agent({ connections: 2 });
    const probe = async (ms: number): Promise<{ gw: number[]; control: number[] }> => {
      const out = { gw: [] as number[], control: [] as number[] };
      const until = performance.now() + ms;
      for (let i = 0; performance.now() < until; i++) {
        for (const which of i % 2 ? (['gw', 'control'] as const) : (['control', 'gw'] as const)) {
          const t0 = performance.now();
          const r = await request(`${(which === 'gw' ? gw : control).gateway}/other/ping`, { dispatcher: prober });
          await r.body.dump();
          expect(r.statusCode).toBe(200);
          out[which].push(performance.now() - t0);
        }
        await sleep(20);
      }
      out.gw.sort((x, y) => x - y);
      out.control.sort((x, y) => x - y);
      return out;
    };
    // each process's longest event-loop delay over a phase (its monitorEventLoopDelay histogram, which a
    // /metrics scrape reads and resets)
    const metric = async (g: Standalone, series: string): Promise<number> => {
      const text = await (await request(`${g.admin}/metrics`)).body.text();
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line ? Number(line.slice(series.length + 1)) : 0;
    };
    // one scrape gives both (it resets the histogram)
    const loopMs = async (g: Standalone) => {
      const text = await (await request(`${g.admin}/metrics`)).body.text();
      const get = (series: string) =>
        Number(
          text
            .split('\n')
            .find((l) => l.startsWith(`${series} `))
            ?.slice(series.length + 1) ?? 0,
        ) * 1000;
      return { max: get('nodejs_eventloop_lag_max_seconds'), p99: get('nodejs_eventloop_lag_p99_seconds') };
    };
    const delivered = () => metric(gw, 'gw_stream_messages_out_total{api="events",stream="intake"}');
    const loopMax = async () => ({ gw: await loopMs(gw), control: await loopMs(control) });
    await loopMax();
    const baseline = await probe(2000);
    const baselineLoop = await loopMax();
    // the attack from a process of its own, at the priority this worker had before it was raised: in
    // production an attacker's CPU is not the gateway's host's, and this worker then only times the probes
    const attacker = await attackIntake(gw.gateway, { rate: 19, count: 114, deepEvery: 6 });
    if (prioritised) prioritiseThreads(attacker.pid, ownPriority);
    expect(attacker.flatBytes).toBeGreaterThan(1_000_000);
    expect(attacker.flatBytes).toBeLessThan(1_048_576);
    const cpu0 = cpuMs(gw.proc.pid!);
    const read0 = readBytes(gw.proc.pid!);
    const probing = probe(6000);
    const { flat: flatStatus, deep: deepStatus2 } = await attacker.send();
    const attacked = await probing;
    const cpu1 = cpuMs(gw.proc.pid!);
    const cpu = { main: cpu1.main - cpu0.main, all: cpu1.all - cpu0.all };
    const readMB = (readBytes(gw.proc.pid!) - read0) / 1e6;
    const attackLoop = await loopMax();
    // then the accepted bodies are delivered at the partner's 2/s, nothing arriving: what the delivery
    // alone costs the event loop (its main thread's CPU per message delivered, and the other API's p99)
    const drainCpu0 = cpuMs(gw.proc.pid!);
    const out0 = await delivered();
    const drained = await probe(4000);
    const drainMainMs = cpuMs(gw.proc.pid!).main - drainCpu0.main;
    const loop = { baseline: baselineLoop, attack: attackLoop, drain: await loopMax() };
    const drainCount = (await delivered()) - out0;
    const rss = rssMiB(gw.proc.pid!);
    if (process.env.GW_INTAKE_REPORT)
      writeFileSync(
        process.env.GW_INTAKE_REPORT,
        JSON.stringify({
          baseline,
          attacked,
          flatStatus,
          deepStatus: deepStatus2,
          rss,
          prioritised,
          loop,
          drained,
          drain: { count: drainCount, mainMs: drainMainMs },
          cpu,
          readMB,
          output: gw.output(),
        }),
      );
    // a deep body is never accepted (400; 429 when the sender's pacing bunched past the API's 20/s)
    // (503 when the buffer has no room for its declared length: refused before it is read)
    expect(deepStatus2.filter((x) => x !== 400 && x !== 429 && x !== 503 && x !== CUT)).toEqual([]);
    expect(deepStatus2.length).toBe(19);
    // 16 MiB waiting at most (~16 flat bodies) plus the ~12 the partner took at 2/s during the 6 s
    const accepted = flatStatus.filter((x) => x === 202).length;
    expect(accepted).toBeGreaterThanOrEqual(16);
    expect(accepted).toBeLessThanOrEqual(40);
    expect(flatStatus.filter((x) => x === 503 || x === CUT).length).toBeGreaterThan(20);
    expect(flatStatus.filter((x) => x === 503).length).toBeGreaterThan(0);
    expect(flatStatus.filter((x) => x !== 202 && x !== 503 && x !== 429 && x !== CUT)).toEqual([]);
    expect(gw.proc.exitCode).toBeNull();
    expect(rss).toBeLessThan(256);
    expect(gw.output()).not.toMatch(/heap limit|FATAL/);
    expect(drainCount).toBeGreaterThanOrEqual(3);
    // a refused body is not read: the 114 MB sent in the 6 s reach the process only for the bodies taken
    // (≤ 40 MB here), plus at most the socket reads under way when each refusal is answered. Reading every
    // body and dropping the refused ones read 126–135 MB; not reading them, 55–86 MB (docs/streams.md).
    // The bytes the process reads are what its main thread spends on them (socket reads, node's buffer
    // for each read, V8's collections of those): counted by the kernel, not timed, so the machine's load
    // cannot move them the way it moves latencies.
    expect(readMB).toBeLessThan(100);
    // another API of the attacked process, timed by this worker during the attack: p99 under 50 ms
    // (docs/streams.md, "Large bodies"). The test runs alone (jest.config.js), so the latencies are the
    // gateway's and not the machine's other suites'; the control (attacked by nobody, timed in the same
    // seconds) is reported beside it. Before the intake's bounds, the same attack took another API's p50 to
    // ~400 ms, then the process down.
    expect(attacked.gw.length).toBeGreaterThan(100);
    expect(p99(attacked.gw)).toBeLessThan(50);
  }, 60_000);
});
