/** drop output: discards every message (counted as delivered). */
import type { Output } from '../types.js';

export class DropOutput implements Output {
  readonly type = 'drop';
  readonly maxInFlight = 1;
  async write(): Promise<void> {}
  async close(): Promise<void> {}
}
