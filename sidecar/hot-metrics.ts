/**
 * The metrics every request writes (requests by status class, decision and upstream latency), kept as
 * plain numbers and read by prom-client's Registry when /metrics is scraped. prom-client's labelled
 * children (`counter.labels(...)`) convert, validate and hash their labels again on every inc()/observe();
 * measured against these series the gap is real (test/bench/metrics.ts, docs/benchmarks.md "Metric writes"). Here the proxy holds a series (one per label set, created once) and a request
 * adds to its numbers. The exposition is prom-client's: a HotMetric presents the same get() a prom-client
 * Counter or Histogram does. Which series exist (per api, per status class) is the proxy's choice
 * (sidecar/proxy/request-metrics.ts), not this file's.
 */
import type {
  Metric,
  MetricObjectWithValues,
  MetricType,
  MetricValue,
  MetricValueWithName,
  Registry,
} from 'prom-client';

type Labels = Record<string, string>;

abstract class HotMetric<S> {
  protected readonly series = new Map<string, { labels: Labels; s: S }>();
  abstract readonly type: 'counter' | 'histogram';
  readonly aggregator = 'sum' as const;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    // the Registry reads name, help, type, aggregator, get() and reset(): the contract of its metrics
    registry.registerMetric(this as unknown as Metric);
  }

  protected abstract create(): S;

  /** The series of a label set (every label name given, nothing else); the same object each time. */
  labels(labels: Labels): S {
    const key = this.labelNames.map((n) => labels[n] ?? '').join('\u0000');
    let e = this.series.get(key);
    if (!e) {
      for (const n of Object.keys(labels))
        if (!this.labelNames.includes(n)) throw new Error(`${this.name}: unknown label ${n}`);
      for (const n of this.labelNames) if (labels[n] === undefined) throw new Error(`${this.name}: label ${n} missing`);
      const ordered: Labels = {};
      for (const n of this.labelNames) ordered[n] = labels[n]!;
      this.series.set(key, (e = { labels: ordered, s: this.create() }));
    }
    return e.s;
  }

  /** Every series back to zero (series stay: the proxy holds them). */
  reset(): void {
    for (const { s } of this.series.values()) this.zero(s);
  }
  protected abstract zero(s: S): void;

  /** What get() answers the Registry: this metric's values with its name, help, type and aggregator. */
  protected exposition<V extends MetricValue<string>>(values: V[]): MetricObjectWithValues<V> {
    return {
      name: this.name,
      help: this.help,
      type: this.type as unknown as MetricType,
      aggregator: this.aggregator,
      values,
    } as MetricObjectWithValues<V>;
  }
}

export class CounterSeries {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

export class HotCounter extends HotMetric<CounterSeries> {
  readonly type = 'counter' as const;
  protected create(): CounterSeries {
    return new CounterSeries();
  }
  protected zero(s: CounterSeries): void {
    s.value = 0;
  }
  async get(): Promise<MetricObjectWithValues<MetricValue<string>>> {
    const values = [...this.series.values()].map(({ labels, s }) => ({ labels, value: s.value }));
    return this.exposition(values);
  }
}

export class HistogramSeries {
  /** counts[i]: observations in (bounds[i-1], bounds[i]]; the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

export class HotHistogram extends HotMetric<HistogramSeries> {
  readonly type = 'histogram' as const;
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly buckets: readonly number[],
    registry: Registry,
  ) {
    super(name, help, labelNames, registry);
    if (labelNames.length === 0) this.unlabelled = this.labels({}); // shown (all zero) before the first observation, as prom-client does
  }
  private unlabelled: HistogramSeries | undefined;
  protected create(): HistogramSeries {
    return new HistogramSeries(this.buckets);
  }
  protected zero(s: HistogramSeries): void {
    s.counts.fill(0);
    s.sum = 0;
    s.count = 0;
  }
  /** An observation of the histogram without labels. */
  observe(v: number): void {
    (this.unlabelled ??= this.labels({})).observe(v);
  }
  async get(): Promise<MetricObjectWithValues<MetricValueWithName<string>>> {
    const values: MetricValueWithName<string>[] = [];
    for (const { labels, s } of this.series.values()) {
      let acc = 0;
      this.buckets.forEach((le, i) => {
        acc += s.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { le, ...labels }, value: acc });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...labels }, value: s.count });
      values.push({ metricName: `${this.name}_sum`, labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels, value: s.count });
    }
    return this.exposition(values);
  }
}
