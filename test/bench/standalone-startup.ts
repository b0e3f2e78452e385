/**
 * gw standalone's start-up alone, several times on one directory (`make bench-scale`'s standalone fixture:
 * GW_BENCH_SCALE_APIS one-API files, 10,000, and GW_BENCH_SCALE_KEYS keys, 100,000, 1,000 per file), as
 * the image runs it (its NODE_OPTIONS). Per run: wall time from spawn to the ready line, the CPU time of
 * the main thread, of the parse worker and of every other thread (GC helpers, libuv) at the ready line
 * (/proc/PID/task/ * /stat), and peak RSS (VmHWM). GW_BENCH_STARTUP_RUNS (3), GW_BENCH_STARTUP_REDIS
 * (a redis URL: `--redis` runs), GW_BENCH_STARTUP_ARGS (extra node flags, e.g. `--cpu-prof`).
 * Run: `node dist/test/bench/standalone-startup.js`.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeScaleFixture } from './scale-fixture.js';
import { startStandalone } from '../helpers/standalone.js';
import { threadCpuSeconds } from './proc.js';
import { IMAGE_NODE_OPTIONS } from '../../webhook/node-options.js';

const APIS = Number(process.env.GW_BENCH_SCALE_APIS ?? 10_000);
const KEYS = Number(process.env.GW_BENCH_SCALE_KEYS ?? 100_000);
const RUNS = Number(process.env.GW_BENCH_STARTUP_RUNS ?? 3);
const REDIS = process.env.GW_BENCH_STARTUP_REDIS;
const NODE_ARGS = (process.env.GW_BENCH_STARTUP_ARGS ?? '').split(' ').filter(Boolean);

async function startOnce(dir: string): Promise<{ wallS: number; cpu: Record<string, number>; hwmMb: number }> {
  const t0 = performance.now();
  const gw = await startStandalone(
    dir,
    REDIS ? ['--redis', REDIS] : [],
    { GW_SECRET: 'bench-secret', GW_ACCESS_TOKENS: 'bench-token', NODE_OPTIONS: IMAGE_NODE_OPTIONS },
    { nodeArgs: NODE_ARGS, readyTimeoutMs: 600_000 },
  );
  // read as the ready line arrives (the helper resolves on it)
  const wallS = (performance.now() - t0) / 1000;
  const pid = gw.proc.pid!;
  const cpu = threadCpuSeconds(pid);
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  await gw.stop();
  return { wallS, cpu, hwmMb: m ? Number(m[1]) / 1024 : NaN };
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-startup-'));
try {
  writeScaleFixture(dir, APIS, KEYS);
  for (let r = 0; r < RUNS; r++) {
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
    const { wallS, cpu, hwmMb } = await startOnce(dir);
    const main = cpu.main ?? 0;
    const others = Object.entries(cpu).filter(([n]) => n !== 'main');
    const total = others.reduce((s, [, v]) => s + v, main);
    console.log(
      `standalone start-up ${APIS} APIs + ${KEYS} keys${REDIS ? ' --redis' : ''}: ready after ${wallS.toFixed(2)} s; CPU main ${main.toFixed(2)} s, all threads ${total.toFixed(2)} s (${others
        .filter(([, v]) => v >= 0.05)
        .map(([n, v]) => `${n} ${v.toFixed(2)}`)
        .join(', ')}); peak RSS ${hwmMb.toFixed(0)} MB; load ${load}`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
