/**
 * The keyless stream intake under attack, in a real `gw standalone` process with the V8 heap flags an
 * injected sidecar gets for the chart's 256 MiB memory limit (--max-old-space-size=153, webhook/node-options.ts):
 * the examples/06-streams.yaml shape (intake 20/s for everyone, partner 2/s), 4 small events, then 1 MB
 * bodies of 500,000 nested arrays (each had been accepted and held ~25 MB of heap: the process died with
 * "Reached heap limit" after 6), then 1 MB flat JSON bodies at 19/s, inside the API's limit, for 6 s.
 * Deep bodies → 400; flat ones → 202 until the stream's 16 MiB byte bound, then 503; the process stays
 * up, its RSS under 256 MiB, and another API's median latency where it was.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { startEchoProcess } from '../../helpers/echo-process.js';
import { sleep } from './helpers.js';

const rssMiB = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('a keyless stream intake under attack', () => {
  let rx: { url: string; stop: () => void };
  let gw: Standalone;
  let dir: string;
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
    gw = await startStandalone(dir, [], {}, { nodeArgs: ['--max-old-space-size=153', '--max-semi-space-size=8'] });
  });
  afterAll(async () => {
    await gw?.stop();
    rx?.stop();
    cleanup(dir);
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

  test('deep bodies are refused (400), the byte bound answers 503, the process stays up and within its memory, another API median unchanged', async () => {
    const small = [];
    for (let i = 0; i < 4; i++) small.push(await post(JSON.stringify({ user: { id: `u${i}` }, debug: true })));
    expect(small).toEqual([202, 202, 202, 202]);

    const deep = Buffer.from(`{"user":{"id":${'['.repeat(500_000)}${']'.repeat(500_000)}}}`);
    const deepStatus = [];
    for (let i = 0; i < 6; i++) deepStatus.push(await post(deep));
    expect(deepStatus).toEqual(Array(6).fill(400));

    // another API: its latency alone first (what this machine gives), then while 1 MB bodies (flat, and
    // every sixth deep) arrive at 19/s for 6 s
    const probe = async (ms: number): Promise<number[]> => {
      const out: number[] = [];
      const until = performance.now() + ms;
      while (performance.now() < until) {
        const t0 = performance.now();
        const r = await request(`${gw.gateway}/other/ping`);
        await r.body.dump();
        expect(r.statusCode).toBe(200);
        out.push(performance.now() - t0);
        await sleep(20);
      }
      return out.sort((x, y) => x - y);
    };
    const p99 = (l: number[]) => l[Math.floor(l.length * 0.99)]!;
    const baseline = await probe(2000);
    const flat = Buffer.from(
      JSON.stringify({ user: { id: 'u' }, items: Array.from({ length: 130_000 }, () => ({ a: 1 })) }),
    );
    expect(flat.length).toBeGreaterThan(1_000_000);
    expect(flat.length).toBeLessThan(1_048_576);
    const flatStatus: number[] = [];
    const deepStatus2: number[] = [];
    const sends: Promise<void>[] = [];
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
    const rss = rssMiB(gw.proc.pid!);
    if (process.env.GW_INTAKE_REPORT)
      writeFileSync(
        process.env.GW_INTAKE_REPORT,
        JSON.stringify({ baseline, attacked, flatStatus, deepStatus: deepStatus2, rss }),
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
    // the attack leaves the other API's median where it was (within 50 ms on a loaded machine). Its p99 is not bounded here:
    // the parse and re-serialisation of each delivered 1 MB body still hold the loop (docs/streams.md)
    expect(attacked.length).toBeGreaterThan(50);
    const p50 = (l: number[]) => l[Math.floor(l.length * 0.5)]!;
    expect(p50(attacked)).toBeLessThan(50 + p50(baseline));
    expect(p99(baseline)).toBeGreaterThan(0);
  }, 60_000);
});
