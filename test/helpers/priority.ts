/**
 * A process's scheduling priority for the measuring tests. Linux keeps a nice value per thread, and
 * setpriority(pid) reaches only the thread whose id is the pid: the main thread. A node process's other
 * threads (V8's GC and compiler workers, libuv's pool) keep theirs, so under a busy machine the main
 * thread waits for a concurrent marking that runs behind the machine's other work.
 */
import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';

/** Every thread of `pid` at `priority`; false when one could not be set (not root nor CAP_SYS_NICE). */
export function prioritiseThreads(pid: number, priority: number): boolean {
  let ok = true;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    tids = [String(pid)]; // no /proc: the main thread only
  }
  for (const tid of tids) {
    try {
      setPriority(Number(tid), priority);
    } catch {
      ok = false; // a thread that ended meanwhile, or no right to raise it
    }
  }
  return ok;
}
