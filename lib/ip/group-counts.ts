/**
 * Open things (connections, HTTP/2 sessions) counted per client address group (client-address.ts,
 * `addressGroup`), with a cap: the per-client connection caps of lib/serve.ts and of the HTTP/2 listener.
 */
import { addressGroup } from './client-address.js';

export class GroupCounts {
  private readonly open = new Map<string, number>();

  constructor(private readonly cap: number) {}

  /**
   * Counts one more for `address`'s group and returns the function that counts it out again, or
   * undefined (nothing counted) when the group already holds `cap`.
   */
  enter(address: string | undefined): (() => void) | undefined {
    const group = addressGroup(address);
    const n = (this.open.get(group) ?? 0) + 1;
    if (n > this.cap) return undefined;
    this.open.set(group, n);
    return () => {
      const left = (this.open.get(group) ?? 1) - 1;
      if (left > 0) this.open.set(group, left);
      else this.open.delete(group);
    };
  }
}
