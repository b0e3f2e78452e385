/**
 * Long synchronous work cut into slices: `due()` says the current slice is used up, `yield()` lets the
 * event loop run (requests, timers, I/O) before the next one. Work over thousands of items (a directory
 * of manifests, every key of a snapshot) calls it every few items, so no request waits longer than about
 * one slice behind it.
 *
 * The slice is the event loop's, not one Yielder's: every Yielder measures from the last time any of them
 * gave the event loop back. An apply runs through several steps (read, compile, hash, keys), each with
 * its own Yielder; without a shared start, the tail of one step's slice and the head of the next one's
 * would run as one stretch of twice the slice.
 */
let sliceStart = performance.now();

export class Yielder {
  constructor(private readonly sliceMs = 4) {}

  due(): boolean {
    return performance.now() - sliceStart >= this.sliceMs;
  }

  async yield(): Promise<void> {
    await new Promise((r) => setImmediate(r));
    sliceStart = performance.now();
  }

  /** Yields when the slice is used up. */
  async maybe(): Promise<void> {
    if (this.due()) await this.yield();
  }
}
