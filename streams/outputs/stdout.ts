/** stdout output: one JSON line per message (a string body is written as is). */
import type { Message, Output } from '../types.js';

export interface LineWriter {
  write(chunk: string): unknown;
}

export class StdoutOutput implements Output {
  readonly type = 'stdout';
  readonly maxInFlight = 1;
  constructor(private readonly out: LineWriter = process.stdout) {}

  async write(msg: Message): Promise<void> {
    const line = typeof msg.body === 'string' ? msg.body : JSON.stringify(msg.body);
    this.out.write(`${line.replace(/\n/g, ' ')}\n`);
  }

  async close(): Promise<void> {}
}
