/**
 * http_client processor: sends the message to a service (rate-limited, retried like the output) and
 * replaces the message with the response — or, with result_field, stores the response under that field
 * of the (object) message. A JSON response is parsed (at most MAX_JSON_DEPTH levels deep); anything else
 * is kept as a string.
 */
import type { Clock } from '../../lib/clock.js';
import type { HttpClientProcessorT } from '../../crds/schemas/streaming.js';
import { decodeBody } from '../body.js';
import { editInThread, encodeMessage, isLarge } from '../body-thread.js';
import { HttpCaller } from '../http-call.js';
import { editor } from './mapping.js';
import type { StreamMeter } from '../metrics.js';
import type { LocalRateLimit } from '../rate-limit.js';
import { PermanentError, type Message, type Processor } from '../types.js';

const parse = (text: string): unknown => (text === '' ? null : decodeBody(text));

export class HttpClientProcessor implements Processor {
  readonly type = 'http_client';
  private readonly caller: HttpCaller;

  constructor(
    private readonly o: HttpClientProcessorT,
    limiter: LocalRateLimit | undefined,
    clock: Clock,
    private readonly meter: StreamMeter,
    concurrency: number,
  ) {
    this.caller = new HttpCaller(o, limiter, clock, concurrency);
  }

  async process(msg: Message, signal: AbortSignal): Promise<Message> {
    const res = await this.caller.call(() => encodeMessage(msg), signal, {
      onRateLimitWait: () => this.meter.rateLimitWait(this.o.rate_limit ?? ''),
      onRetry: () => this.meter.retry('processor.http_client'),
      traceparent: msg.meta.traceparent,
    });
    // a large answer (or a large message to store it in) is parsed and merged by the body thread
    const large = isLarge(res.text);
    if (!this.o.result_field) {
      if (large) return { id: msg.id, body: undefined, raw: Buffer.from(res.text), meta: msg.meta };
      return { id: msg.id, body: parse(res.text), meta: msg.meta };
    }
    if (large || msg.raw !== undefined) {
      const raw = msg.raw ?? Buffer.from(JSON.stringify(msg.body ?? null));
      if (msg.raw === undefined && (typeof msg.body !== 'object' || msg.body === null || Array.isArray(msg.body)))
        throw new PermanentError('http_client processor: result_field needs a JSON object message');
      return editInThread(msg, raw, [{ set: { path: this.o.result_field, text: res.text } }]);
    }
    const result = parse(res.text);
    const body = msg.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new PermanentError('http_client processor: result_field needs a JSON object message');
    }
    // a copy that shares what the result does not replace (a deep clone of a large body held the loop)
    const e = editor(body as Record<string, unknown>);
    e.set(this.o.result_field, result);
    return { ...msg, body: e.out };
  }

  async close(): Promise<void> {
    await this.caller.close();
  }
}
