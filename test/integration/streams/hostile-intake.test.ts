/**
 * The keyless stream intake under attack, in a real `gw standalone` process with the V8 heap flags an
 * injected sidecar gets for the chart's 256 MiB memory limit (--max-old-space-size=153, webhook/node-options.ts):
 * the examples/06-streams.yaml shape (intake 20/s for everyone, partner 2/s), 4 small events, then 1 MB
 * bodies of 500,000 nested arrays (each had been accepted and held ~25 MB of heap: the process died with
 * "Reached heap limit" after 6), then 1 MB flat JSON bodies at 19/s, inside the API's limit, for 6 s.
 * Deep bodies → 400; flat ones → 202 until the stream's 16 MiB byte bound, then 503; the process stays
 * up, its RSS under 256 MiB, another API's median latency where it was, and while the accepted bodies
 * are delivered, that API's p99 close to the one of a twin process nobody attacks (the control).
 * GW_INTAKE_REPORT=<file> writes the figures (latencies, event-loop delay, CPU) as JSON.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { startEchoProcess } from '../../helpers/echo-process.js';
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

const rssMiB = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('a keyless stream intake under attack', () => {
  let rx: { url: string; stop: () => void };
  let gw: Standalone;
  let control: Standalone;
  let dir: string;
  let controlDir: string;
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
  });
  afterAll(async () => {
    await gw?.stop();
    await control?.stop();
    rx?.stop();
    cleanup(dir);
    cleanup(controlDir);
  });

  async function post(body: string | Buffer): Promise<number> {
    const r = await request(`${gw.gateway}/events/in`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    });
    await r.body.dump();
    return r.statusCode;
  }

  test('deep bodies are refused (400), the byte bound answers 503, the process stays up and within its memory, another API p50 unchanged, its p99 bounded while the bodies are delivered', async () => {
    const small = [];
    for (let i = 0; i < 4; i++) small.push(await post(JSON.stringify({ user: { id: `u${i}` }, debug: true })));
    expect(small).toEqual([202, 202, 202, 202]);

    const deep = Buffer.from(`{"user":{"id":${'['.repeat(500_000)}${']'.repeat(500_000)}}}`);
    const deepStatus = [];
    for (let i = 0; i < 6; i++) deepStatus.push(await post(deep));
    expect(deepStatus).toEqual(Array(6).fill(400));

    // another API, on this process and on a twin process nobody attacks (the control: the same machine
    // at the same moments, so a loaded machine raises both), probed in turns: alone first, then while 1 MB
    // bodies (flat, and every sixth deep) arrive at 19/s for 6 s
    const probe = async (ms: number): Promise<{ gw: number[]; control: number[] }> => {
      const out = { gw: [] as number[], control: [] as number[] };
      const until = performance.now() + ms;
      for (let i = 0; performance.now() < until; i++) {
        for (const which of i % 2 ? (['gw', 'control'] as const) : (['control', 'gw'] as const)) {
          const t0 = performance.now();
          const r = await request(`${(which === 'gw' ? gw : control).gateway}/other/ping`);
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
    const pct = (l: number[], p: number) => l[Math.min(l.length - 1, Math.floor(l.length * p))]!;
    // each process's longest event-loop delay over a phase (its monitorEventLoopDelay histogram, which a
    // /metrics scrape reads and resets)
    const metric = async (g: Standalone, series: string): Promise<number> => {
      const text = await (await request(`${g.admin}/metrics`)).body.text();
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line ? Number(line.slice(series.length + 1)) : 0;
    };
    const loopMaxMs = async (g: Standalone) => (await metric(g, 'nodejs_eventloop_lag_max_seconds')) * 1000;
    const delivered = () => metric(gw, 'gw_stream_messages_out_total{api="events",stream="intake"}');
    const loopMax = async () => ({ gw: await loopMaxMs(gw), control: await loopMaxMs(control) });
    await loopMax();
    const baseline = await probe(2000);
    const baselineLoop = await loopMax();
    const flat = Buffer.from(
      JSON.stringify({ user: { id: 'u' }, items: Array.from({ length: 130_000 }, () => ({ a: 1 })) }),
    );
    expect(flat.length).toBeGreaterThan(1_000_000);
    expect(flat.length).toBeLessThan(1_048_576);
    const flatStatus: number[] = [];
    const deepStatus2: number[] = [];
    const sends: Promise<void>[] = [];
    const cpu0 = cpuMs(gw.proc.pid!);
    const start = performance.now();
    const probing = probe(6000);
    for (let i = 0; i < 114; i++) {
      const at = start + (i * 1000) / 19;
      await sleep(Math.max(0, at - performance.now()));
      const isDeep = i % 6 === 5;
      sends.push(post(isDeep ? deep : flat).then((s) => void (isDeep ? deepStatus2 : flatStatus).push(s)));
    }
    await Promise.all(sends);
    const attacked = await probing;
    const cpu1 = cpuMs(gw.proc.pid!);
    const cpu = { main: cpu1.main - cpu0.main, all: cpu1.all - cpu0.all };
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
          loop,
          drained,
          drain: { count: drainCount, mainMs: drainMainMs },
          cpu,
          output: gw.output(),
        }),
      );
    // a deep body is never accepted (400; 429 when the sender's pacing bunched past the API's 20/s)
    expect(deepStatus2.filter((x) => x !== 400 && x !== 429)).toEqual([]);
    expect(deepStatus2.filter((x) => x === 400).length).toBeGreaterThan(10);
    // 16 MiB waiting at most (~16 flat bodies) plus the ~12 the partner took at 2/s during the 6 s
    const accepted = flatStatus.filter((x) => x === 202).length;
    expect(accepted).toBeGreaterThanOrEqual(16);
    expect(accepted).toBeLessThanOrEqual(40);
    expect(flatStatus.filter((x) => x === 503).length).toBeGreaterThan(20);
    expect(flatStatus.filter((x) => x !== 202 && x !== 503 && x !== 429)).toEqual([]);
    expect(gw.proc.exitCode).toBeNull();
    expect(rss).toBeLessThan(256);
    expect(gw.output()).not.toMatch(/heap limit|FATAL/);
    // the other API during the attack: its median where it was
    expect(attacked.gw.length).toBeGreaterThan(50);
    expect(pct(attacked.gw, 0.5)).toBeLessThan(50 + pct(baseline.gw, 0.5));
    // and while the accepted bodies are delivered: its p99 within 40 ms + twice the control's over the
    // same seconds (< 50 ms on a quiet machine, where the control's is ~5 ms). Parsing and re-serialising
    // each delivered 1 MB body on the event loop (~35 + 12 ms on an idle core, several times that under
    // load) put it at 300–500 ms here; the body thread (streams/body-thread.ts) keeps that off the loop.
    expect(drainCount).toBeGreaterThanOrEqual(3);
    expect(pct(drained.gw, 0.99)).toBeLessThan(40 + 2 * pct(drained.control, 0.99));
  }, 60_000);
});
