/**
 * Long synchronous work cut into slices: `due()` says the current slice is used up, `yield()` lets the
 * event loop run (requests, timers, I/O) before the next one. Work over thousands of items (a directory
 * of manifests, every key of a snapshot) calls it every few hundred items, so no request waits longer
 * than about one slice behind it.
 */
export class Yielder {
  private start = performance.now();

  constructor(private readonly sliceMs = 4) {}

  due(): boolean {
    return performance.now() - this.start >= this.sliceMs;
  }

  async yield(): Promise<void> {
    await new Promise((r) => setImmediate(r));
    this.start = performance.now();
  }

  /** Yields when the slice is used up. */
  async maybe(): Promise<void> {
    if (this.due()) await this.yield();
  }
}
