/**
 * OpenTelemetry span export (SPEC.md §7): the OpenTelemetry JS SDK's tracer provider, parent-based, with
 * new traces sampled at `samplingRatio` by `sampleRoot()` before any span is built (a request that is not
 * recorded costs no SDK call: the proxy sends a traceparent of its own), a batch span processor (bounded queue, export on a timer, off the request path)
 * and the OTLP/HTTP exporter (JSON to `endpoint` + `/v1/traces`). The SDK is imported only when span
 * export is on: a gateway without it loads none of it.
 */
import type { Attributes, Span, Tracer } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { throttledLog } from '../log-throttle.js';
import { formatTraceparent, validTraceparent } from './trace-context.js';

export interface TracingOptions {
  /** Collector base URL (`http://collector:4318`); spans go to `<endpoint>/v1/traces`. */
  endpoint: string;
  /** Share of new traces recorded (0..1); a request that carries a trace follows its sampled flag. */
  samplingRatio: number;
  /** `service.name` of the spans (gw-sidecar, gw-controller…). */
  serviceName: string;
  /** Spans waiting for export at most; more are dropped (the request path never waits). */
  maxQueueSize?: number;
  /** Milliseconds between two exports. */
  exportDelayMs?: number;
  /** An export that failed (collector unreachable, refused): counted by the caller. */
  onExportFailure(err: Error, spans: number): void;
  /** The log line for failed exports, at most one a minute. */
  logExportFailure(err: Error, suppressed: number): void;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** Whether a new trace is recorded (a draw at the sampling ratio). */
  sampleRoot(): boolean;
  /**
   * A SERVER span for an incoming request, child of its `traceparent` when valid (its `tracestate` kept),
   * else the root of a new trace. A non-recording span when the sampler declines.
   */
  startServer(
    name: string,
    traceparent: string | string[] | undefined,
    tracestate: string | string[] | undefined,
    attributes: Attributes,
  ): Span;
  /** An INTERNAL span (a store round trip, a reconcile), child of `parent` or a new trace (drawn by sampleRoot). */
  startChild(name: string, parent: Span | undefined, attributes?: Attributes): Span;
  /** The traceparent that makes `span` the parent of the next hop. */
  traceparentOf(span: Span): string;
  /** Exports what is queued and stops. */
  shutdown(): Promise<void>;
}

/** Loads the SDK and starts export; never throws for an unreachable collector (export fails later, counted). */
export async function startTracing(o: TracingOptions): Promise<Tracing> {
  const [api, sdk, { OTLPTraceExporter }, { resourceFromAttributes }, semconv] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
  ]);
  const otlp = new OTLPTraceExporter({
    url: `${o.endpoint.replace(/\/+$/, '')}/v1/traces`,
    timeoutMillis: 10_000,
  });
  const logFailure = throttledLog<Error>(60_000, (err, suppressed) => o.logExportFailure(err, suppressed));
  // the exporter's result, turned into a metric and a log line a minute at most
  const exporter: SpanExporter = {
    export(spans: ReadableSpan[], done) {
      otlp.export(spans, (result) => {
        if (result.code !== 0) {
          const err = result.error ?? new Error('span export failed');
          o.onExportFailure(err, spans.length);
          logFailure(err);
        }
        done(result);
      });
    },
    shutdown: () => otlp.shutdown(),
    forceFlush: () => otlp.forceFlush(),
  };
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: o.serviceName }),
    // roots reach the SDK only once sampleRoot() drew them
    sampler: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter,
        maxQueueSize: o.maxQueueSize ?? 2048,
        maxExportBatchSize: 512,
        scheduledDelayMillis: o.exportDelayMs ?? 1000,
        exportTimeoutMillis: 15_000,
      }),
    ],
  });
  const tracer = provider.getTracer('gw');
  const { ROOT_CONTEXT, SpanKind, trace, createTraceState, INVALID_SPAN_CONTEXT } = api;
  const server = { kind: SpanKind.SERVER, attributes: undefined as Attributes | undefined };
  const ratio = Math.min(1, Math.max(0, o.samplingRatio));
  const sampleRoot = (): boolean => ratio >= 1 || (ratio > 0 && Math.random() < ratio);
  return {
    tracer,
    sampleRoot,
    startServer(name, traceparent, tracestate, attributes) {
      let ctx = ROOT_CONTEXT;
      if (validTraceparent(traceparent)) {
        ctx = trace.setSpanContext(ROOT_CONTEXT, {
          traceId: traceparent.slice(3, 35),
          spanId: traceparent.slice(36, 52),
          traceFlags: parseInt(traceparent.slice(53, 55), 16) & 1,
          isRemote: true,
          traceState: typeof tracestate === 'string' && tracestate !== '' ? createTraceState(tracestate) : undefined,
        });
      }
      server.attributes = attributes;
      return tracer.startSpan(name, server, ctx);
    },
    startChild(name, parent, attributes) {
      if (parent === undefined && !sampleRoot()) return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
      return tracer.startSpan(
        name,
        { kind: SpanKind.INTERNAL, attributes },
        parent ? trace.setSpan(ROOT_CONTEXT, parent) : ROOT_CONTEXT,
      );
    },
    traceparentOf(span) {
      const c = span.spanContext();
      return formatTraceparent(c.traceId, c.spanId, (c.traceFlags & 1) === 1);
    },
    shutdown: () => provider.shutdown(),
  };
}
