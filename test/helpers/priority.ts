/**
 * A process's scheduling priority for the measuring tests. Linux keeps a nice value per thread, and
 * setpriority(pid) reaches only the thread whose id is the pid: the main thread. A node process's other
 * threads (V8's GC and compiler workers, libuv's pool) keep theirs, so under a busy machine the main
 * thread waits for a concurrent marking that runs behind the machine's other work.
 */
import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * The main thread of `pid` at `priority`, and each other thread moved by as much from its own: a thread
 * the process runs in the background (lib/background-thread.ts) stays that far below the others. False
 * when one could not be set (not root nor CAP_SYS_NICE).
 */
export function prioritiseThreads(pid: number, priority: number): boolean {
  let by: number;
  let tids: string[];
  try {
    by = priority - getPriority(pid);
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false; // the process is gone, or no /proc
  }
  let ok = true;
  for (const tid of tids) {
    try {
      setPriority(Number(tid), Math.max(-20, Math.min(19, getPriority(Number(tid)) + by)));
    } catch {
      ok = false; // a thread that ended meanwhile, or no right to raise it
    }
  }
  return ok;
}
