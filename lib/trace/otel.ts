/**
 * OpenTelemetry span export (docs/contract.md#observability): parent-based sampling, new traces sampled at `samplingRatio` by
 * `sampleRoot()` before any span is built (a request that is not recorded costs no span: the proxy sends a
 * traceparent of its own), recorded spans queued (bounded) and exported on a timer, off the request path, by
 * the OpenTelemetry OTLP/HTTP exporter (JSON to `endpoint` + `/v1/traces`). A recorded span is a small object
 * of this file's, handed to the exporter as the SDK's ReadableSpan: at a sampling ratio of 0.01 the SDK's
 * tracer and batch processor cost several times more per span than this (docs/dependencies.md). The
 * exporter is imported only when span export is on: a gateway without it loads none of it.
 */
import type {
  Attributes,
  AttributeValue,
  Exception,
  HrTime,
  Link,
  Span,
  SpanContext,
  SpanStatus,
  TimeInput,
} from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter, TimedEvent } from '@opentelemetry/sdk-trace';
import type { Resource } from '@opentelemetry/resources';
import { throttledLog } from '../log-throttle.js';
import { formatTraceparent, newSpanId, newTraceId, validTraceparent } from './trace-context.js';

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

/** SpanKind of @opentelemetry/api (a const enum there, so its numbers here). */
const KIND_SERVER = 1;
const KIND_INTERNAL = 0;
const SCOPE = { name: 'gw' };

/** Milliseconds since the epoch as OpenTelemetry's HrTime: [seconds, nanoseconds]. */
function hrOfMs(ms: number): HrTime {
  const sec = Math.floor(ms / 1000);
  return [sec, Math.round((ms - sec * 1000) * 1e6)];
}

/** Wall-clock time now as HrTime. */
function hrNow(): HrTime {
  return hrOfMs(performance.timeOrigin + performance.now());
}

function hrOf(t: TimeInput | undefined): HrTime {
  if (t === undefined) return hrNow();
  if (Array.isArray(t)) return t as HrTime;
  return hrOfMs(t instanceof Date ? t.getTime() : (t as number));
}

/** What a recorded span goes to when it ends. */
interface SpanSink {
  resource: Resource;
  ended(span: RecordedSpan): void;
}

/** A sampled span: what the request path writes, and what the exporter reads once it has ended. */
class RecordedSpan implements Span, ReadableSpan {
  readonly startTime: HrTime = hrNow();
  endTime: HrTime = [0, 0];
  duration: HrTime = [0, 0];
  status: SpanStatus = { code: 0 };
  ended = false;
  readonly links: Link[] = [];
  readonly events: TimedEvent[] = [];
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  readonly instrumentationScope = SCOPE;
  readonly resource: Resource;

  constructor(
    private readonly sink: SpanSink,
    public name: string,
    readonly kind: number,
    private readonly ctx: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly attributes: Attributes,
  ) {
    this.resource = sink.resource;
  }

  spanContext(): SpanContext {
    return this.ctx;
  }
  setAttribute(key: string, value: AttributeValue): this {
    if (!this.ended && value !== undefined && value !== null) this.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: Attributes): this {
    if (!this.ended) Object.assign(this.attributes, attributes);
    return this;
  }
  addEvent(name: string, a?: Attributes | TimeInput, t?: TimeInput): this {
    if (this.ended) return this;
    const timed = a === undefined || typeof a === 'number' || a instanceof Date || Array.isArray(a);
    this.events.push({
      name,
      attributes: timed ? {} : a,
      time: hrOf(timed ? (a as TimeInput | undefined) : t),
      droppedAttributesCount: 0,
    });
    return this;
  }
  addLink(link: Link): this {
    if (!this.ended) this.links.push(link);
    return this;
  }
  addLinks(links: Link[]): this {
    for (const l of links) this.addLink(l);
    return this;
  }
  setStatus(status: SpanStatus): this {
    if (!this.ended) this.status = status;
    return this;
  }
  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }
  end(endTime?: TimeInput): void {
    if (this.ended) return;
    this.ended = true;
    const e = hrOf(endTime);
    this.endTime = e;
    let sec = e[0] - this.startTime[0];
    let ns = e[1] - this.startTime[1];
    if (ns < 0) {
      sec -= 1;
      ns += 1e9;
    }
    this.duration = [sec, ns];
    this.sink.ended(this);
  }
  isRecording(): boolean {
    return !this.ended;
  }
  recordException(exception: Exception, time?: TimeInput): void {
    const e = typeof exception === 'string' ? { message: exception } : exception;
    this.addEvent(
      'exception',
      {
        ...(e.name !== undefined ? { 'exception.type': e.name } : {}),
        ...(e.message !== undefined ? { 'exception.message': e.message } : {}),
        ...(e.stack !== undefined ? { 'exception.stacktrace': e.stack } : {}),
      },
      time,
    );
  }
}

/**
 * Ended spans waiting for export: at most `max` (more are dropped, the request path never waits). A batch of
 * at most `batch` leaves as soon as one is full, else when the oldest span has waited `delayMs`; one export
 * at a time, and spans that end during an export wait for the next batch (no trickle of small exports).
 */
class SpanQueue {
  private spans: RecordedSpan[] = [];
  private timer: NodeJS.Timeout | undefined;
  private exporting = false;
  /** flush() has taken over: no timer, no batch of the queue's own any more. */
  private flushing = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly max: number,
    private readonly batch: number,
    private readonly delayMs: number,
  ) {}

  add(span: RecordedSpan): void {
    if (this.spans.length >= this.max) return;
    this.spans.push(span);
    if (this.exporting) return; // the export's end looks at what waits
    if (this.spans.length >= this.batch) void this.exportBatch();
    else this.startTimer();
  }

  private startTimer(): void {
    if (this.flushing || this.timer !== undefined || !this.spans.length) return;
    this.timer = setTimeout(() => void this.exportBatch(), this.delayMs);
    this.timer.unref();
  }

  /** One batch out; then the next if a full one waits, else the timer for what is left. */
  private async exportBatch(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.flushing || this.exporting || !this.spans.length) return;
    this.exporting = true;
    const batch = this.spans.splice(0, this.batch);
    await new Promise<void>((done) => this.exporter.export(batch, () => done()));
    this.exporting = false;
    if (this.flushing) return;
    if (this.spans.length >= this.batch) void this.exportBatch();
    else this.startTimer();
  }

  /** Exports everything queued (shutdown). */
  async flush(): Promise<void> {
    this.flushing = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.exporting) await new Promise((r) => setTimeout(r, 5));
    while (this.spans.length) {
      const batch = this.spans.splice(0, this.batch);
      await new Promise<void>((done) => this.exporter.export(batch, () => done()));
    }
  }
}

/** Loads the exporter and starts export; never throws for an unreachable collector (export fails later, counted). */
export async function startTracing(o: TracingOptions): Promise<Tracing> {
  const [api, { OTLPTraceExporter }, { resourceFromAttributes }, semconv] = await Promise.all([
    import('@opentelemetry/api'),
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
  const queue = new SpanQueue(exporter, o.maxQueueSize ?? 2048, 512, o.exportDelayMs ?? 1000);
  const sink: SpanSink = {
    resource: resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: o.serviceName }),
    ended: (span) => queue.add(span),
  };
  const { trace, createTraceState } = api;
  const ratio = Math.min(1, Math.max(0, o.samplingRatio));
  const sampleRoot = (): boolean => ratio >= 1 || (ratio > 0 && Math.random() < ratio);
  /** A span in `parent`'s trace (a new trace without one): recorded when the parent is sampled. */
  const start = (name: string, kind: number, parent: SpanContext | undefined, attributes: Attributes): Span => {
    const traceId = parent?.traceId ?? newTraceId();
    const sampled = parent === undefined || (parent.traceFlags & 1) === 1;
    const ctx: SpanContext = {
      traceId,
      spanId: newSpanId(),
      traceFlags: sampled ? 1 : 0,
      traceState: parent?.traceState,
    };
    if (!sampled) return trace.wrapSpanContext(ctx);
    return new RecordedSpan(sink, name, kind, ctx, parent, attributes);
  };
  return {
    sampleRoot,
    startServer(name, traceparent, tracestate, attributes) {
      const parent = validTraceparent(traceparent)
        ? {
            traceId: traceparent.slice(3, 35),
            spanId: traceparent.slice(36, 52),
            traceFlags: parseInt(traceparent.slice(53, 55), 16) & 1,
            isRemote: true,
            traceState: typeof tracestate === 'string' && tracestate !== '' ? createTraceState(tracestate) : undefined,
          }
        : undefined;
      return start(name, KIND_SERVER, parent, attributes);
    },
    startChild(name, parent, attributes) {
      if (parent === undefined) {
        if (!sampleRoot()) return trace.wrapSpanContext(api.INVALID_SPAN_CONTEXT);
        return start(name, KIND_INTERNAL, undefined, { ...attributes });
      }
      const p = parent.spanContext();
      if (!parent.isRecording()) return trace.wrapSpanContext({ ...p, spanId: newSpanId() });
      return start(name, KIND_INTERNAL, p, { ...attributes });
    },
    traceparentOf(span) {
      const c = span.spanContext();
      return formatTraceparent(c.traceId, c.spanId, (c.traceFlags & 1) === 1);
    },
    async shutdown() {
      await queue.flush();
      await otlp.shutdown();
    },
  };
}
