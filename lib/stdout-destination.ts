/**
 * An asynchronous sonic-boom destination on a file descriptor (stdout) that can never keep the process from
 * exiting: its flush at exit gives a reader that does not drain FLUSH_SYNC_MS, then gives up (asynchronous
 * writes keep retrying), and a reader that has gone (EPIPE) ends the writing (sonic-boom 5 gives up on it;
 * the version pino depends on retried for ever, so `gw … | head` never exited on SIGTERM). Errors are
 * swallowed: with stdout gone nothing can be logged there, and the process goes on serving.
 */
import sonicBoom from 'sonic-boom';

const { SonicBoom } = sonicBoom;
export type Destination = InstanceType<typeof SonicBoom>;

/** How long a synchronous flush (at exit) waits for a reader that does not drain (ms). */
export const FLUSH_SYNC_MS = 1000;

/** `maxLength`: what may wait unwritten for a stalled reader; beyond it writes are dropped ('drop'). */
export function stdoutDestination(fd = 1, maxLength = 0): { dest: Destination; flush: () => void } {
  let syncUntil: number | undefined;
  const dest = new SonicBoom({
    fd,
    sync: false,
    maxLength,
    retryEAGAIN: () => syncUntil === undefined || Date.now() < syncUntil,
  });
  dest.on('error', () => undefined);
  const flush = (): void => {
    syncUntil = Date.now() + FLUSH_SYNC_MS;
    try {
      dest.flushSync();
    } catch {
      // a write still in flight finishes on its own; a reader that did not drain in FLUSH_SYNC_MS loses the rest
    } finally {
      syncUntil = undefined;
    }
  };
  return { dest, flush };
}
