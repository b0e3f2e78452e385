/**
 * A set of at most `max` names that keeps the recently used ones: when full, a new name evicts one not
 * used since the eviction scan last passed it (second chance, the CLOCK approximation of least recently
 * used that page caches use). One Map entry per name and nothing else: a hit on a name already marked
 * costs one lookup and no write, and there is no list to relink (a limit_by gateway touches one name per
 * request and holds up to max_client_buckets of them).
 */
export class RecentSet {
  /** name → used since the scan last passed it (1) or not (0); Map order is the scan order. */
  private readonly names = new Map<string, 0 | 1>();
  /**
   * The scan's position, kept between evictions: a scan started afresh each time would walk over every
   * name deleted before it (a Map keeps deleted entries as holes until it rehashes), O(n) per eviction.
   */
  private hand: MapIterator<string> = this.names.keys();

  constructor(
    private readonly max: number,
    /** A name evicted to make room (not called for delete() or clear()). */
    private readonly onEvict: (name: string) => void,
  ) {
    if (!(max >= 1)) throw new Error(`RecentSet: max must be at least 1 (got ${max})`);
  }

  /** Marks `name` as used, adding it (and evicting one when full) if it is new. */
  touch(name: string): void {
    const used = this.names.get(name);
    if (used === 1) return;
    if (used === 0) {
      this.names.set(name, 1);
      return;
    }
    if (this.names.size >= this.max) this.evictOne();
    this.names.set(name, 0);
  }

  has(name: string): boolean {
    return this.names.has(name);
  }

  delete(name: string): void {
    this.names.delete(name);
  }

  get size(): number {
    return this.names.size;
  }

  /**
   * From the scan's position: a name used since it was last passed gets a second chance (moved to the end,
   * unmarked), the first one not used is evicted. Ends within size + 1 steps: a full pass unmarks every name.
   */
  private evictOne(): void {
    for (let steps = 0; steps <= this.names.size + 1; steps++) {
      let r = this.hand.next();
      if (r.done === true) {
        this.hand = this.names.keys();
        r = this.hand.next();
        if (r.done === true) return;
      }
      const name = r.value;
      const used = this.names.get(name);
      this.names.delete(name);
      if (used === 0) {
        this.onEvict(name);
        return;
      }
      this.names.set(name, 0); // at the end: the scan reaches it again after every other name
    }
  }
}
