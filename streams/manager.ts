/**
 * The stream manager: runs the streams of every served ApiDefinition in this gateway process.
 *
 * - apply(apis) starts, reconfigures and stops streams to match `spec.streaming` of each API. A stream
 *   whose config is unchanged keeps running. A changed stream is replaced: its http_server route moves to
 *   the new pipeline at once (new messages wait in its buffer), the old pipeline stops its input and drains
 *   everything it accepted (however long its rate limits make that; shutdown cuts it to drainTimeoutMs),
 *   then the new one starts — so order is kept and nothing accepted is dropped. A removed stream (or API)
 *   is drained and stopped the same way. Drains run off the apply chain: other changes do not wait.
 * - `streaming` is validated with the zod schema; a bad one is logged and skipped (whatever already runs
 *   for that API keeps running), never thrown.
 * - Rate-limit resources belong to the API's streaming config in this process: every stream and component
 *   of that API naming a label shares one LocalRateLimit. A reload keeps the limiter (and its window
 *   history) and only changes count/interval, so a reload never opens a fresh allowance.
 * - tryHandle() serves http_server inputs: POST to the API's listen path + the input path.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { StreamingSpec, normalizeInputPath, type StreamSpecT, type StreamingSpecT } from '../crds/schemas/streaming.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { buildPipeline } from './build.js';
import { durationMs } from './duration.js';
import { HttpServerInput } from './inputs/http-server.js';
import { StreamMetrics, meterFor } from './metrics.js';
import type { LineWriter } from './outputs/stdout.js';
import { ByteBudget, type Pipeline } from './pipeline.js';
import { LocalRateLimit, preciseClock } from './rate-limit.js';

export interface StreamApi {
  api_id: string;
  listenPath: string;
  streaming?: unknown;
}

export interface StreamManagerOptions {
  logger: Logger;
  /** The gateway's Redis store: the default of redis_streams inputs without a url. */
  redisUrl?: string;
  clock?: Clock;
  /** How long a stopped or replaced pipeline may take to drain (default 10 s). */
  drainTimeoutMs?: number;
  /** Where the stdout output writes (default process.stdout). */
  stdout?: LineWriter;
  /** Raw payload bytes all http_server buffers of the process may hold together (default STREAM_BUFFER_BYTES). */
  bufferBytes?: number;
}

/**
 * Default of the process-wide stream buffer: 48 MiB of bodies accepted and not yet taken by a worker,
 * whatever the number of streams (each is also bounded by its own max_pending_bytes, 16 MiB by
 * default). Bodies wait as raw bytes (Buffers, outside V8's old space), so in a sidecar with the chart's
 * 256 MiB limit and its 153 MiB old-space flag they add at most 48 MiB beside the heap (docs/streams.md).
 */
export const STREAM_BUFFER_BYTES = 48 * 1024 * 1024;

export interface StreamInfo {
  api_id: string;
  stream: string;
  input: string;
  output: string;
  pending: number;
}

export interface StreamManager {
  apply(apis: StreamApi[]): Promise<void>;
  /** true when an http_server input took the request (and answers it); false: proxy as usual. */
  tryHandle(apiId: string, relPath: string, req: IncomingMessage, res: ServerResponse): boolean;
  metrics(registry: Registry): void;
  /** Running streams (for status and tests). */
  list(): StreamInfo[];
  /** The rate-limit resources in effect, with their resolved count and interval (defaults applied). */
  limits(): LimitInfo[];
  stop(): Promise<void>;
}

export interface LimitInfo {
  api_id: string;
  label: string;
  count: number;
  intervalMs: number;
  /** Accesses in flight or inside the window right now. */
  used: number;
  /** Callers waiting for their turn. */
  waiting: number;
}

interface RunningStream {
  fingerprint: string;
  pipeline: Pipeline;
  output: string;
  /** Settles once this pipeline runs (after the one it replaced has drained). */
  started: Promise<void>;
}

interface ApiState {
  listenPath: string;
  limiters: Map<string, LocalRateLimit>;
  streams: Map<string, RunningStream>;
  routes: Map<string, HttpServerInput>;
}

/** "streams.x.output.http_client.rate_limit: unknown rate-limit label ..." for each issue. */
export function describeIssues(
  issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>,
  prefix = 'spec.streaming',
): string {
  return issues.map((i) => `${[prefix, ...i.path.map(String)].join('.')}: ${i.message}`).join('; ');
}

export function createStreamManager(opts: StreamManagerOptions): StreamManager {
  const logger = opts.logger;
  const clock = opts.clock ?? preciseClock;
  const drainMs = opts.drainTimeoutMs ?? 10_000;
  const m = new StreamMetrics();
  const budget = new ByteBudget(opts.bufferBytes ?? STREAM_BUFFER_BYTES);
  const apis = new Map<string, ApiState>();
  let chain: Promise<void> = Promise.resolve();
  let stopped = false;
  /** Pipelines replaced or removed and still draining, off the apply chain (stop() cuts them to drainMs). */
  const retiring = new Set<Pipeline>();

  /**
   * A replaced or removed pipeline drains everything it accepted, however long its rate limits make
   * that (a 10 s deadline here dropped the backlog of a stream edited while it had one), off the apply
   * chain so other APIs' changes are not held behind it; shutdown (stop()) cuts it to drainTimeoutMs.
   */
  function retire(p: Pipeline): Promise<void> {
    retiring.add(p);
    return p.stop(Infinity).finally(() => retiring.delete(p));
  }

  function updateLimiters(state: ApiState, spec: StreamingSpecT, apiId: string): void {
    const seen = new Set<string>();
    for (const r of spec.rate_limit_resources) {
      seen.add(r.label);
      const intervalMs = durationMs(r.local.interval);
      const l = state.limiters.get(r.label);
      if (l) l.configure(r.local.count, intervalMs);
      else
        state.limiters.set(
          r.label,
          new LocalRateLimit({ count: r.local.count, intervalMs, clock, label: `${apiId}/${r.label}` }),
        );
    }
    for (const label of [...state.limiters.keys()]) if (!seen.has(label)) state.limiters.delete(label);
  }

  /** Starts p once `old` (the stream it replaces, itself started first) has drained: order is kept. */
  function start(p: Pipeline, old: RunningStream | undefined): Promise<void> {
    return (async () => {
      if (old) {
        await old.started;
        await retire(old.pipeline);
      }
      if (stopped) return p.stop(drainMs);
      await p.start();
    })().catch((e: unknown) => {
      logger.error({ api: p.api, stream: p.name, err: (e as Error).message }, 'stream failed to start');
    });
  }

  async function applyApi(api: StreamApi, spec: StreamingSpecT | undefined): Promise<void> {
    let state = apis.get(api.api_id);
    if (!spec || Object.keys(spec.streams).length === 0) {
      if (!state) return;
      apis.delete(api.api_id);
      state.routes.clear();
      for (const s of state.streams.values()) void s.started.then(() => retire(s.pipeline));
      return;
    }
    if (!state) {
      state = { listenPath: api.listenPath, limiters: new Map(), streams: new Map(), routes: new Map() };
      apis.set(api.api_id, state);
    }
    state.listenPath = api.listenPath;
    updateLimiters(state, spec, api.api_id);
    const st = state;
    const next = new Map<string, RunningStream>();
    for (const [name, s] of Object.entries(spec.streams) as [string, StreamSpecT][]) {
      const fingerprint = JSON.stringify(s);
      const old = st.streams.get(name);
      if (old && old.fingerprint === fingerprint) {
        next.set(name, old);
        continue;
      }
      let p: Pipeline;
      try {
        p = buildPipeline(s, {
          api: api.api_id,
          name,
          logger,
          clock,
          meter: meterFor(m, api.api_id, name),
          redisUrl: opts.redisUrl,
          stdout: opts.stdout,
          limiter: (label) => (label === undefined ? undefined : st.limiters.get(label)),
          budget,
        });
      } catch (e) {
        logger.error(
          { api: api.api_id, stream: name, err: `spec.streaming.streams.${name}.${(e as Error).message}` },
          'stream refused',
        );
        if (old) next.set(name, old);
        continue;
      }
      // not awaited: a replaced stream may take long to drain, and nothing else waits for it
      next.set(name, { fingerprint, pipeline: p, output: Object.keys(s.output)[0] ?? '', started: start(p, old) });
      logger.info({ api: api.api_id, stream: name, action: old ? 'reconfigure' : 'start' }, 'stream applied');
    }
    for (const [name, old] of st.streams) {
      if (next.get(name) !== old) {
        if (!next.has(name)) {
          void old.started.then(() => retire(old.pipeline));
          logger.info({ api: api.api_id, stream: name, action: 'stop' }, 'stream applied');
        }
      }
    }
    st.streams = next;
    // Routes switch atomically to the new set of http_server inputs.
    const routes = new Map<string, HttpServerInput>();
    for (const s of next.values()) {
      const input = s.pipeline.input;
      if (input instanceof HttpServerInput) routes.set(normalizeInputPath(input.options.path), input);
    }
    st.routes = routes;
  }

  async function doApply(list: StreamApi[]): Promise<void> {
    if (stopped) return;
    // keep: a refused config leaves whatever runs for that API alone.
    const wanted = new Map<string, { api: StreamApi; spec: StreamingSpecT | undefined; keep?: true }>();
    for (const api of list) {
      if (api.streaming === undefined || api.streaming === null) {
        wanted.set(api.api_id, { api, spec: undefined });
        continue;
      }
      const r = StreamingSpec.safeParse(api.streaming);
      if (!r.success) {
        logger.error(
          { api: api.api_id, err: describeIssues(r.error.issues) },
          'streaming config refused; keeping the streams already running',
        );
        wanted.set(api.api_id, { api, spec: undefined, keep: true });
        continue;
      }
      wanted.set(api.api_id, { api, spec: r.data });
    }
    const work: Promise<void>[] = [];
    for (const [id, state] of apis) {
      if (!wanted.has(id)) work.push(applyApi({ api_id: id, listenPath: state.listenPath }, undefined));
    }
    for (const { api, spec, keep } of wanted.values()) {
      // an API without streams that had none: nothing to do (most APIs of a large config)
      if (keep || (!spec && !apis.has(api.api_id))) continue;
      work.push(applyApi(api, spec));
    }
    await Promise.all(work);
  }

  return {
    apply(list) {
      const run = chain.then(() => doApply(list));
      chain = run.catch((e: unknown) => logger.error({ err: (e as Error).message }, 'stream apply failed'));
      return chain;
    },

    tryHandle(apiId, relPath, req, res) {
      if ((req.method ?? 'GET').toUpperCase() !== 'POST') return false;
      const state = apis.get(apiId);
      if (!state) return false;
      const input = state.routes.get(normalizeInputPath(relPath));
      if (!input) return false;
      input.handle(req, res);
      return true;
    },

    metrics(registry) {
      m.register(registry);
    },

    list() {
      const out: StreamInfo[] = [];
      for (const [api_id, state] of apis) {
        for (const [stream, s] of state.streams) {
          out.push({ api_id, stream, input: s.pipeline.input.type, output: s.output, pending: s.pipeline.pending });
        }
      }
      return out;
    },

    limits() {
      const out: LimitInfo[] = [];
      for (const [api_id, state] of apis) {
        for (const [label, l] of state.limiters)
          out.push({ api_id, label, ...l.limit, used: l.used(), waiting: l.waiting });
      }
      return out;
    },

    async stop() {
      const done = chain;
      stopped = true;
      await done;
      const work: Promise<void>[] = [];
      for (const state of apis.values()) {
        state.routes.clear();
        for (const s of state.streams.values()) work.push(s.pipeline.stop(drainMs));
      }
      for (const p of retiring) work.push(p.stop(drainMs)); // their full drains cut to the deadline
      const states = [...apis.values()];
      apis.clear();
      await Promise.all(work);
      for (const state of states) for (const l of state.limiters.values()) l.close(new Error('stream manager stopped'));
    },
  };
}
