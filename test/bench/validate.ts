/**
 * `gw validate` on a directory of GW_BENCH_VALIDATE_FILES (10,000) one-document manifests
 * (test/fixtures/many-manifests.ts), GW_BENCH_VALIDATE_RUNS (5) times: per run of the real binary, the
 * wall time from spawn to exit (node's start-up included) and its CPU time (user + system, all threads:
 * bash's `times` of its child), then the medians and the load average (a shared machine's wall times
 * follow its load; the CPU time much less). GW_BENCH_VALIDATE_CLI: another build's dist/cli/gw.js to time
 * (the same fixture and runs, for a before/after). Figures: docs/standalone.md,
 * "Checking manifests before they are applied". Run: `make build && node dist/test/bench/validate.js`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { writeManyManifests } from '../fixtures/many-manifests.js';
import { CLI } from '../helpers/standalone.js';

const FILES = Number(process.env.GW_BENCH_VALIDATE_FILES ?? 10_000);
const RUNS = Number(process.env.GW_BENCH_VALIDATE_RUNS ?? 5);
/** Another build's gw.js to run instead (an older checkout's `dist/cli/gw.js`: before/after on one machine). */
const GW = process.env.GW_BENCH_VALIDATE_CLI ?? CLI;

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-validate-'));
try {
  writeManyManifests(dir, FILES);
  const walls: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    // `times` prints the shell's own times, then its children's: `0m1.234s 0m0.456s`
    const r = spawnSync(
      'bash',
      ['-c', '"$0" "$1" validate "$2" >/dev/null 2>&1; rc=$?; times; exit $rc', process.execPath, GW, dir],
      {
        encoding: 'utf8',
      },
    );
    walls.push((performance.now() - t0) / 1000);
    if (r.status !== 0) throw new Error(`gw validate exited ${r.status}: ${r.stderr}`);
    const child = r.stdout.trim().split('\n')[1] ?? '';
    const secs = [...child.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
    cpus.push(secs.reduce((a, b) => a + b, 0));
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const { loadavg } = process.getBuiltinModule('node:os');
  process.stdout.write(
    `gw validate, ${FILES} files: wall ${walls.map((w) => w.toFixed(2)).join(', ')} s (median ${median(walls).toFixed(2)}); ` +
      `CPU ${cpus.map((c) => c.toFixed(2)).join(', ')} s (median ${median(cpus).toFixed(2)}); load average ${loadavg()[0]!.toFixed(1)}\n`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
