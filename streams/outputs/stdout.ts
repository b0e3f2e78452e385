/** stdout output: one JSON line per message (a string body is written as is). */
import { encodeMessage } from '../body-thread.js';
import type { Message, Output } from '../types.js';

export interface LineWriter {
  write(chunk: string): unknown;
}

export class StdoutOutput implements Output {
  readonly type = 'stdout';
  readonly maxInFlight = 1;
  constructor(private readonly out: LineWriter = process.stdout) {}

  async write(msg: Message): Promise<void> {
    if (msg.raw !== undefined) {
      // a large payload: serialised by the body thread; JSON text holds no raw newline
      const { payload, contentType } = await encodeMessage(msg);
      const line = typeof payload === 'string' ? payload : Buffer.from(payload).toString('utf8');
      this.out.write(`${contentType === 'application/json' ? line : line.replace(/\n/g, ' ')}\n`);
      return;
    }
    const line = typeof msg.body === 'string' ? msg.body : JSON.stringify(msg.body);
    this.out.write(`${line.replace(/\n/g, ' ')}\n`);
  }

  async close(): Promise<void> {}
}
