/**
 * gw standalone's reload path in process, without HTTP: DirSource (standalone/dir-source.ts) +
 * StandaloneState (standalone/state.ts) over a directory of GW_BENCH_SCALE_APIS one-API files (10,000) and
 * GW_BENCH_SCALE_KEYS keys (100,000, 1,000 per file). Prints the first load (read, parse, apply), then one
 * edited API file and one edited key file applied through the watch path, then a burst of GW_BENCH_BURST
 * (3,000) new API files written by a shell loop into the watched directory: the time to apply and the
 * longest event-loop stall meanwhile, in wall time and in CPU time of this thread. Run: `node dist/test/bench/standalone-apply.js` (`--cpu-prof` to profile).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirSource } from '../../standalone/dir-source.js';
import { StandaloneState } from '../../standalone/state.js';
import { MemorySessionStore } from '../../stores/sessions-memory.js';
import { createLogger } from '../../lib/logger.js';
import { sha256hex } from '../../lib/hash.js';
import { prepareRoutes } from '../../sidecar/proxy/router.js';

const APIS = Number(process.env.GW_BENCH_SCALE_APIS ?? 10_000);
const KEYS = Number(process.env.GW_BENCH_SCALE_KEYS ?? 100_000);
const BURST = Number(process.env.GW_BENCH_BURST ?? 3_000);
/** One API manifest for printf (%s: its number, twice). */
const burstYaml =
  'apiVersion: gw.io/v1alpha1\\nkind: ApiDefinition\\nmetadata: {name: burst-%s}\\nspec:\\n  use_keyless: true\\n  proxy: {listen_path: /burst-%s/, target_url: "http://127.0.0.1:9"}\\n';

const apiYaml = (i: number, listen = `/api-${i}/`): string =>
  `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: api-${i}}\nspec:\n  api_id: api-${i}\n  use_keyless: true\n  proxy: {listen_path: ${listen}, target_url: 'http://127.0.0.1:9'}\n`;
const keyDoc = (k: number, rate = 100): string =>
  `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${k}}\nspec: {key_hash: ${sha256hex(`bench-${k}`)}, rate: ${rate}, per: 1}\n`;
const keysFile = (f: number, rate = 100): string => {
  const docs: string[] = [];
  for (let k = f * 1000; k < (f + 1) * 1000 && k < KEYS; k++) docs.push(keyDoc(k, rate));
  return docs.join('---\n');
};

const cpuMs = (): number => {
  const c = process.threadCpuUsage();
  return (c.user + c.system) / 1000;
};

/**
 * The longest gap between 1 ms timer ticks while `work` runs, in wall time and in this thread's CPU time
 * (the synchronous work between two ticks: on a loaded machine the wall gap also counts the time the
 * thread waited for a core), and how many gaps took more than 10 ms of CPU.
 */
async function stallDuring<T>(
  work: () => Promise<T>,
): Promise<{ result: T; ms: number; stallMs: number; stallCpuMs: number; over10: number }> {
  let last = performance.now();
  let lastCpu = cpuMs();
  let worst = 0;
  let worstCpu = 0;
  let over10 = 0;
  const tick = (): void => {
    const now = performance.now();
    const cpu = cpuMs();
    worst = Math.max(worst, now - last);
    worstCpu = Math.max(worstCpu, cpu - lastCpu);
    if (cpu - lastCpu > 10) over10++;
    last = now;
    lastCpu = cpu;
  };
  const timer = setInterval(tick, 1);
  const t0 = performance.now();
  const result = await work();
  const ms = performance.now() - t0;
  clearInterval(timer);
  tick();
  return { result, ms, stallMs: worst, stallCpuMs: worstCpu, over10 };
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-apply-'));
try {
  for (let i = 0; i < APIS; i++) writeFileSync(join(dir, `api-${i}.yaml`), apiYaml(i));
  for (let f = 0; f < KEYS / 1000; f++) writeFileSync(join(dir, `keys-${f}.yaml`), keysFile(f));
  const logger = createLogger('bench', 'warn');
  const source = new DirSource(dir, logger);
  const state = new StandaloneState(dir, new MemorySessionStore(), logger);
  // as gw standalone applies a snapshot: the reconciler, then the gateway's routing trie
  source.onChange(async (s) => {
    await state.apply(s);
    prepareRoutes(state.current().apis);
  });
  const t0 = performance.now();
  await source.load();
  const loadedMs = performance.now() - t0;
  await state.apply(source.current());
  const startMs = performance.now() - t0;
  console.log(
    `standalone-apply: ${APIS} APIs + ${KEYS} keys: read + parsed in ${loadedMs.toFixed(0)} ms, applied after ${startMs.toFixed(0)} ms (${state.current().apis.length} APIs served)`,
  );
  const last = APIS - 1;
  for (const [what, file, text] of [
    ['an API file', `api-${last}.yaml`, apiYaml(last, '/moved/')],
    ['a file of 1,000 keys', 'keys-0.yaml', keysFile(0, 7)],
  ] as const) {
    writeFileSync(join(dir, file), text);
    const from = process.hrtime.bigint() / 1000n;
    const r = await stallDuring(() => source.changed([file]));
    // the window in the clock of a --cpu-prof profile (µs), for reading its longest synchronous stretches
    if (process.env.GW_BENCH_WINDOWS) console.log(`window ${from} ${process.hrtime.bigint() / 1000n}`);
    console.log(
      `standalone-apply: one edit of ${what} applied in ${r.ms.toFixed(0)} ms; longest event-loop stall ${r.stallMs.toFixed(0)} ms (${r.stallCpuMs.toFixed(1)} ms of CPU)`,
    );
  }
  // a burst: BURST new API files written by a shell loop while the directory is watched (coalesced applies)
  source.start();
  const before = source.current().apis.length;
  const burst = await stallDuring(async () => {
    const script = `for i in $(seq ${BURST}); do printf '${burstYaml}' $i $i > "$1/burst-$i.yaml"; done`;
    await new Promise<void>((res, rej) => {
      const sh = spawn('sh', ['-c', script, 'sh', dir], { stdio: 'ignore' });
      sh.once('exit', (code) => (code === 0 ? res() : rej(new Error(`writer exited ${code}`))));
    });
    const deadline = Date.now() + 120_000;
    while (state.current().apis.length < before + BURST && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
  });
  console.log(
    `standalone-apply: a burst of ${BURST} new API files (shell loop, watched) applied in ${burst.ms.toFixed(0)} ms (${state.current().apis.length - before} applied); longest event-loop stall ${burst.stallMs.toFixed(0)} ms (${burst.stallCpuMs.toFixed(1)} ms of CPU), ${burst.over10} stalls over 10 ms of CPU`,
  );
  source.stop();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
