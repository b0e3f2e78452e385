/**
 * http_client output: delivers each message to a service. Up to max_in_flight messages at once (1 keeps
 * the order); every attempt takes from the named rate-limit resource; 429/408/5xx and network errors are
 * retried with backoff, honouring Retry-After (docs in ../http-call.ts).
 */
import type { Clock } from '../../lib/clock.js';
import type { HttpClientOutputT } from '../../crds/schemas/streaming.js';
import { encodeMessage } from '../body-thread.js';
import { HttpCaller } from '../http-call.js';
import type { StreamMeter } from '../metrics.js';
import type { LocalRateLimit } from '../rate-limit.js';
import type { Message, Output } from '../types.js';

export class HttpClientOutput implements Output {
  readonly type = 'http_client';
  readonly maxInFlight: number;
  private readonly caller: HttpCaller;

  constructor(
    private readonly o: HttpClientOutputT,
    limiter: LocalRateLimit | undefined,
    clock: Clock,
    private readonly meter: StreamMeter,
  ) {
    this.maxInFlight = o.max_in_flight;
    this.caller = new HttpCaller(o, limiter, clock, o.max_in_flight);
  }

  async write(msg: Message, signal: AbortSignal): Promise<void> {
    await this.caller.call(() => encodeMessage(msg), signal, {
      onRateLimitWait: () => this.meter.rateLimitWait(this.o.rate_limit ?? ''),
      onRetry: () => this.meter.retry('output.http_client'),
      traceparent: msg.meta.traceparent,
    });
  }

  async close(): Promise<void> {
    await this.caller.close();
  }
}
