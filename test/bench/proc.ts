/** Child processes of the benchmarks: stopping one, and its RSS and CPU time from /proc (Linux). */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** SIGTERM; SIGKILL when it has not exited after `graceMs`. */
export async function stopChild(c: ChildProcess, graceMs: number): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const gone = new Promise((r) => c.once('exit', r));
  c.kill('SIGTERM');
  await Promise.race([gone, new Promise((r) => setTimeout(r, graceMs))]);
  if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** The fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], utime [11], stime [12]). */
const statFields = (stat: string): string[] => stat.slice(stat.lastIndexOf(')') + 2).split(' ');

/** `own` summed over a process and its direct children (nginx's worker); NaN when there is no such process. */
function overFamily(pid: number | undefined, own: (pid: string, stat: string) => number): number {
  if (!pid) return NaN;
  try {
    let total = own(String(pid), readFileSync(`/proc/${pid}/stat`, 'utf8'));
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const st = readFileSync(`/proc/${d}/stat`, 'utf8');
        if (Number(statFields(st)[1]) === pid) total += own(d, st);
      } catch {
        // the process ended
      }
    }
    return total;
  } catch {
    return NaN;
  }
}

/** A process and its direct children (nginx's worker); empty when there is no such process. */
export function family(pid: number | undefined): number[] {
  const pids: number[] = [];
  overFamily(pid, (p) => (pids.push(Number(p)), 0));
  return pids;
}

/** Moves every thread of each process to `cpu` (taskset -a -p). */
export function pinTo(cpu: string, pids: number[]): void {
  for (const pid of pids) spawnSync('taskset', ['-a', '-p', '-c', cpu, String(pid)], { stdio: 'ignore' });
}

/** The command line of a process (argv, from /proc/PID/cmdline). */
export function cmdline(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
}

/** VmRSS in MB of a process and its direct children. */
export function rssMb(pid: number | undefined): number {
  return overFamily(
    pid,
    (p) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0) / 1024,
  );
}

let clkTck: number | undefined;

/** utime + stime in seconds of a process and its direct children. */
export function cpuSeconds(pid: number | undefined): number {
  clkTck ??= Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim() || 100);
  const ticks = (stat: string): number => {
    const f = statFields(stat);
    return Number(f[11]) + Number(f[12]);
  };
  return overFamily(pid, (_, st) => ticks(st)) / clkTck;
}

/** CPU time of one process (utime + stime), in clock ticks (100 per second). */
export function cpuTicks(pid: number): number {
  const fields = statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  return Number(fields[11]) + Number(fields[12]);
}

/** A memory figure of /proc/<pid>/status in MB (VmRSS now, VmHWM the peak); NaN when missing. */
export function memMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** body(0 … n-1), at most `width` at once (creating objects through an API server). */
export async function parallel(n: number, body: (i: number) => Promise<unknown>, width = 32): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next++; i < n; i = next++) await body(i);
    }),
  );
}

/** CPU seconds of a live process by thread name (its main thread as `main`; USER_HZ 100). */
export function threadCpuSeconds(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended
    }
    const name = Number(tid) === pid ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = statFields(stat);
    out[name] = (out[name] ?? 0) + (Number(f[11]) + Number(f[12])) / 100;
  }
  return out;
}
