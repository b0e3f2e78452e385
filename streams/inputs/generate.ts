/** generate input: a message every `interval`, `count` times (0: for ever). For demos and tests. */
import type { GenerateInputT } from '../../crds/schemas/streaming.js';
import { durationMs, sleep } from '../duration.js';
import type { Input, InputContext } from '../types.js';

export class GenerateInput implements Input {
  readonly type = 'generate';
  readonly bufferSize = 1;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly options: GenerateInputT,
    private readonly ctx: InputContext,
    private readonly stream: string,
  ) {}

  async start(): Promise<void> {
    this.loop ??= this.run();
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    const every = durationMs(this.options.interval);
    const body = this.options.message === undefined ? {} : this.options.message;
    try {
      for (let i = 0; this.options.count === 0 || i < this.options.count; i++) {
        await sleep(every, signal);
        const msg = { id: `${this.stream}-${i}`, body: structuredClone(body), meta: { generate_index: String(i) } };
        await this.ctx.push(msg, () => undefined, signal);
      }
    } catch (e) {
      if (!signal.aborted)
        this.ctx.logger.warn({ stream: this.stream, err: (e as Error).message }, 'generate input stopped');
    }
  }

  async stop(): Promise<void> {
    this.abort.abort(new Error('stopped'));
    await this.loop;
  }

  async close(): Promise<void> {}
}
