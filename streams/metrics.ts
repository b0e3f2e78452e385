/** Prometheus metrics of the streams, per API and stream (prom-client). Registered by the manager's metrics(). */
import { Counter, Histogram, type Registry } from 'prom-client';

export class StreamMetrics {
  readonly messagesIn = new Counter({
    name: 'gw_stream_messages_in_total',
    help: 'Messages accepted by a stream input',
    labelNames: ['api', 'stream'],
    registers: [],
  });
  readonly messagesOut = new Counter({
    name: 'gw_stream_messages_out_total',
    help: 'Messages delivered by a stream output',
    labelNames: ['api', 'stream'],
    registers: [],
  });
  readonly messagesFailed = new Counter({
    name: 'gw_stream_messages_failed_total',
    help: 'Messages a stream gave up on (rejected by a processor or the peer, or retries exhausted)',
    labelNames: ['api', 'stream'],
    registers: [],
  });
  readonly rateLimitWaits = new Counter({
    name: 'gw_stream_rate_limit_waits_total',
    help: 'Accesses that waited for their turn at a rate-limit resource',
    labelNames: ['api', 'stream', 'label'],
    registers: [],
  });
  readonly retries = new Counter({
    name: 'gw_stream_retries_total',
    help: 'HTTP attempts of stream components that failed and were retried',
    labelNames: ['api', 'stream', 'component'],
    registers: [],
  });
  readonly outputSeconds = new Histogram({
    name: 'gw_stream_output_seconds',
    help: 'Time for the output to deliver one message (retries and rate-limit waits included)',
    labelNames: ['api', 'stream'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [],
  });

  private readonly registered = new Set<Registry>();

  register(registry: Registry): void {
    if (this.registered.has(registry)) return;
    this.registered.add(registry);
    for (const m of [
      this.messagesIn,
      this.messagesOut,
      this.messagesFailed,
      this.rateLimitWaits,
      this.retries,
      this.outputSeconds,
    ]) {
      registry.registerMetric(m);
    }
  }
}

/** The metrics of one stream, labels bound. */
export interface StreamMeter {
  in(): void;
  out(): void;
  failed(): void;
  rateLimitWait(label: string): void;
  retry(component: string): void;
  outputSeconds(s: number): void;
}

export function meterFor(m: StreamMetrics, api: string, stream: string): StreamMeter {
  return {
    in: () => m.messagesIn.inc({ api, stream }),
    out: () => m.messagesOut.inc({ api, stream }),
    failed: () => m.messagesFailed.inc({ api, stream }),
    rateLimitWait: (label) => m.rateLimitWaits.inc({ api, stream, label }),
    retry: (component) => m.retries.inc({ api, stream, component }),
    outputSeconds: (s) => m.outputSeconds.observe({ api, stream }, s),
  };
}
