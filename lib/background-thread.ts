/**
 * A worker thread's scheduling priority lowered for background work (Linux keeps a nice value per thread):
 * its work then takes the CPU the event loop does not need, instead of sharing the cores with it. Used by
 * the manifests parser (standalone/parse-worker.ts) and the stream body thread (streams/body-worker.ts).
 */
const { readlinkSync } = process.getBuiltinModule('node:fs');
const { setPriority } = process.getBuiltinModule('node:os');

/** Background work's nice value: the event loop's thread (nice 0) gets about nine tenths of a shared core. */
export const BACKGROUND_NICE = 10;

/** The calling thread at BACKGROUND_NICE; false where the platform gives no thread its own priority. */
export function lowerThisThread(): boolean {
  if (process.platform !== 'linux') return false;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    setPriority(tid, BACKGROUND_NICE);
    return true;
  } catch {
    return false; // no /proc, or not permitted: the thread keeps the priority it has
  }
}
