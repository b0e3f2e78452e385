/**
 * What a `make bench` run (run.ts, protocols.ts) starts and must leave behind it: its child processes,
 * each pinned to a CPU with `taskset`, stopped on exit (also on SIGINT/SIGTERM and after the watchdog's
 * GW_BENCH_DEADLINE_S), and its temporary directories, removed on exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const children: ChildProcess[] = [];
const dirs: string[] = [];
/** How this run names itself in its errors (`gw bench`, `gw bench protocols`). */
let who = 'gw bench';

/** Stops the children and removes the directories when the process exits; ends the run after deadlineS. */
export function benchRun(name: string, deadlineS: number): void {
  who = name;
  process.on('exit', () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));
  setTimeout(() => {
    console.error(`${who}: over ${deadlineS} s, stopping`);
    process.exit(1);
  }, deadlineS * 1000).unref();
}

/** A temporary directory, removed on exit. */
export function tmp(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** `cmd` on `cpu` (taskset), stopped on exit; out() is what it printed. */
export function pinned(
  cpu: string,
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): ChildProcess & { out: () => string } {
  const c = spawn('taskset', ['-c', cpu, cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  // the first 64 KiB (ready lines, errors): a gateway writing access logs would fill the runner's memory
  const keep = (d: Buffer): void => void (out.length < 65_536 && (out += d.toString()));
  c.stdout!.on('data', keep);
  c.stderr!.on('data', keep);
  children.push(c);
  return Object.assign(c, { out: () => out });
}

export function portOpen(port: number): Promise<boolean> {
  return new Promise((r) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), r(true)));
    s.once('error', () => r(false));
  });
}

/** Waits up to `ms` for cond; throws naming `what` (and what it printed, `out`) past that. */
export async function waitFor(
  what: string,
  cond: () => Promise<boolean> | boolean,
  ms = 15_000,
  out?: () => string,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${who}: ${what} did not come up${out ? `:\n${out()}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
