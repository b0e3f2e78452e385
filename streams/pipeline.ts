/**
 * Runs one stream: input → buffer → processors → output, with ack semantics.
 *
 * - The buffer holds `input.bufferSize` messages and, of raw payloads (http_server), `input.bufferBytes`
 *   bytes of this stream and `budget.limit` bytes of every stream of the process together. offer()
 *   (http_server) refuses when either is full (an empty buffer takes one message of any size, which its
 *   input has bounded), push() (redis_streams, generate) waits for room: backpressure, never an
 *   unbounded queue. A raw payload is parsed when a worker takes it (streams/body.ts), so parsing runs
 *   at the pace of the output, not of the senders.
 * - `output.maxInFlight` workers take messages in arrival order; each runs the processors then the output
 *   and then acks the message to its input. With one worker, messages reach the output in input order.
 * - A message is acked 'delivered' only after the output succeeded; a processor error or a permanent
 *   refusal of the peer → 'rejected'; retries exhausted → 'failed'; stopped before done → 'aborted'.
 * - stop(): the input stops producing, workers drain the buffer and the messages in flight (up to the
 *   deadline); what is left then is aborted (its input may redeliver: redis_streams does, an http_server
 *   message accepted with 202 is lost and logged). Then the components are closed.
 * - Messages may be offered before start() (hot reload hands the http_server route over to the new
 *   pipeline while the old one drains); they wait in the buffer.
 */
import type { Logger } from '../lib/logger.js';
import { decodeBody } from './body.js';
import { isLarge } from './body-thread.js';
import type { StreamMeter } from './metrics.js';
import {
  PermanentError,
  RetriesExhaustedError,
  type Ack,
  type Input,
  type InputContext,
  type Message,
  type Output,
  type Outcome,
  type Processor,
} from './types.js';

interface Item {
  msg: Message;
  ack: Ack;
  /** Bytes of msg.raw, counted against the buffer's byte bounds while it waits. */
  bytes: number;
}

/** Raw payload bytes that every pipeline of a process may buffer together (StreamManager owns one). */
export class ByteBudget {
  used = 0;
  constructor(readonly limit: number) {}
}

export interface PipelineParts {
  api: string;
  name: string;
  logger: Logger;
  meter: StreamMeter;
  /** Built once the context exists, so the input can feed this pipeline. */
  input: (ctx: InputContext) => Input;
  processors: Processor[];
  output: Output;
  /** Shared with the other pipelines of the process; none: only this pipeline's own bounds. */
  budget?: ByteBudget;
}

export class Pipeline {
  readonly api: string;
  readonly name: string;
  readonly input: Input;
  private readonly processors: Processor[];
  private readonly output: Output;
  private readonly logger: Logger;
  private readonly meter: StreamMeter;
  private readonly buffer: Item[] = [];
  private readonly capacity: number;
  private readonly byteCapacity: number;
  private readonly budget: ByteBudget | undefined;
  private bytes = 0;
  /** Bytes and bodies held by reserve() for bodies being read. */
  private reserved = 0;
  private reservations = 0;
  private readonly roomWaiters: Array<() => void> = [];
  private readonly itemWaiters: Array<() => void> = [];
  private readonly abort = new AbortController();
  private workers: Promise<void>[] = [];
  private started = false;
  private draining = false;
  private closed = false;
  private inFlight = 0;
  private stopping: Promise<void> | undefined;

  constructor(p: PipelineParts) {
    this.api = p.api;
    this.name = p.name;
    this.logger = p.logger;
    this.meter = p.meter;
    this.processors = p.processors;
    this.output = p.output;
    const ctx: InputContext = {
      offer: (msg, ack) => this.offer(msg, ack),
      reserve: (bytes) => this.reserve(bytes),
      push: (msg, ack, signal) => this.push(msg, ack, signal),
      logger: p.logger,
    };
    this.input = p.input(ctx);
    this.capacity = Math.max(1, this.input.bufferSize);
    this.byteCapacity = this.input.bufferBytes ?? Infinity;
    this.budget = p.budget;
  }

  /** Raw payload bytes waiting in the buffer. */
  get bufferedBytes(): number {
    return this.bytes;
  }

  /** Messages buffered or in flight. */
  get pending(): number {
    return this.buffer.length + this.inFlight;
  }

  /** Whether offer() would take a message of `bytes` raw bytes now (room held by reserve() counts as taken). */
  hasRoom(bytes: number): boolean {
    const held = this.buffer.length + this.reservations;
    if (this.closed || this.draining || held >= this.capacity) return false;
    if (bytes > 0 && held > 0 && this.bytes + this.reserved + bytes > this.byteCapacity) return false;
    if (bytes > 0 && this.budget && this.budget.used > 0 && this.budget.used + bytes > this.budget.limit) return false;
    return true;
  }

  /**
   * Holds room for a body of `bytes` while it is read, so that bodies read at the same time cannot each
   * pass the room check and then be refused after being read in full: undefined when there is no room;
   * else the release (idempotent), called before the message is offered or when the body is given up.
   */
  reserve(bytes: number): (() => void) | undefined {
    if (!this.hasRoom(bytes)) return undefined;
    this.reserved += bytes;
    this.reservations++;
    if (this.budget) this.budget.used += bytes;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.reserved -= bytes;
      this.reservations--;
      if (this.budget) this.budget.used -= bytes;
    };
  }

  offer(msg: Message, ack: Ack): boolean {
    const bytes = msg.raw?.byteLength ?? 0;
    if (!this.hasRoom(bytes)) return false;
    this.enqueue({ msg, ack, bytes });
    return true;
  }

  async push(msg: Message, ack: Ack, signal: AbortSignal): Promise<void> {
    while (!this.closed && !this.draining && this.buffer.length >= this.capacity) {
      if (signal.aborted) throw new Error('push aborted');
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          const i = this.roomWaiters.indexOf(done);
          if (i >= 0) this.roomWaiters.splice(i, 1);
          resolve();
        };
        this.roomWaiters.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
    if (signal.aborted) throw new Error('push aborted');
    if (this.closed || this.draining) throw new Error('pipeline stopping');
    this.enqueue({ msg, ack, bytes: msg.raw?.byteLength ?? 0 });
  }

  private enqueue(item: Item): void {
    this.buffer.push(item);
    this.bytes += item.bytes;
    if (this.budget) this.budget.used += item.bytes;
    this.meter.in();
    this.itemWaiters.shift()?.();
  }

  /** An item leaves the buffer: its bytes are free for others. */
  private release(item: Item): void {
    this.bytes -= item.bytes;
    if (this.budget) this.budget.used -= item.bytes;
  }

  private wakeRoom(): void {
    this.roomWaiters.shift()?.();
  }

  async start(): Promise<void> {
    if (this.started || this.closed) return;
    this.started = true;
    const n = Math.max(1, this.output.maxInFlight);
    for (let i = 0; i < n; i++) this.workers.push(this.work());
    await this.input.start();
    this.logger.info(
      { api: this.api, stream: this.name, input: this.input.type, output: this.output.type },
      'stream started',
    );
  }

  private async next(): Promise<Item | undefined> {
    for (;;) {
      const item = this.buffer.shift();
      if (item) {
        this.release(item);
        this.wakeRoom();
        return item;
      }
      if (this.draining || this.closed) return undefined;
      await new Promise<void>((resolve) => this.itemWaiters.push(resolve));
    }
  }

  private async work(): Promise<void> {
    const signal = this.abort.signal;
    for (;;) {
      const item = await this.next();
      if (!item) return;
      // a small raw payload parsed now, and dropped: only messages in flight hold a parsed body. A large
      // one stays as bytes for the body thread (streams/body-thread.ts). Then a turn of the event loop,
      // so the requests waiting meanwhile are served before the processors run.
      if (item.msg.raw) {
        if (!isLarge(item.msg.raw)) item.msg = { id: item.msg.id, body: decodeBody(item.msg.raw), meta: item.msg.meta };
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      this.inFlight++;
      try {
        const outcome = await this.handle(item.msg, signal);
        await this.settle(item, outcome);
      } finally {
        this.inFlight--;
      }
    }
  }

  private async handle(msg: Message, signal: AbortSignal): Promise<Outcome> {
    let m = msg;
    let stage = 'processor';
    try {
      for (const p of this.processors) m = await p.process(m, signal);
      stage = 'output';
      const t0 = performance.now();
      await this.output.write(m, signal);
      this.meter.outputSeconds((performance.now() - t0) / 1000);
      this.meter.out();
      return 'delivered';
    } catch (e) {
      if (signal.aborted) return 'aborted';
      const err = e as Error;
      const outcome: Outcome =
        e instanceof RetriesExhaustedError
          ? 'failed'
          : stage === 'output' && !(e instanceof PermanentError)
            ? 'failed'
            : 'rejected';
      this.meter.failed();
      this.logger.warn(
        { api: this.api, stream: this.name, id: msg.id, stage, outcome, err: err.message },
        'stream message not delivered',
      );
      return outcome;
    }
  }

  private async settle(item: Item, outcome: Outcome): Promise<void> {
    try {
      await item.ack(outcome);
    } catch (e) {
      this.logger.warn(
        { api: this.api, stream: this.name, id: item.msg.id, outcome, err: (e as Error).message },
        'stream ack failed',
      );
    }
  }

  /**
   * Stops the input, drains buffered and in-flight messages for up to `drainTimeoutMs` (Infinity: until
   * done), aborts what is left, then closes the components. Idempotent; a later call with a shorter
   * deadline brings the deadline forward.
   */
  stop(drainTimeoutMs: number): Promise<void> {
    if (this.stopping) {
      // already stopping: a shorter deadline (shutdown during a replacement's full drain) takes over
      this.shorten?.(drainTimeoutMs);
      return this.stopping;
    }
    this.stopping = this.doStop(drainTimeoutMs);
    return this.stopping;
  }

  /** While draining: brings the drain deadline forward to `ms` from now (never later than it was). */
  private shorten: ((ms: number) => void) | undefined;

  private async doStop(drainTimeoutMs: number): Promise<void> {
    // the deadline first, so a shorter one asked for while the input stops applies too
    let timer: ReturnType<typeof setTimeout> | undefined;
    let endsAt = Infinity;
    const shorten = (ms: number, expire: (v: 'timeout') => void): void => {
      if (Date.now() + ms >= endsAt) return;
      endsAt = Date.now() + ms;
      clearTimeout(timer);
      timer = setTimeout(() => expire('timeout'), ms);
    };
    const deadline = new Promise<'timeout'>((r) => {
      this.shorten = (ms) => shorten(ms, r);
      shorten(drainTimeoutMs, r);
    });
    try {
      await this.input.stop();
    } catch (e) {
      this.logger.warn({ api: this.api, stream: this.name, err: (e as Error).message }, 'stream input stop failed');
    }
    if (!this.started) {
      // Never ran (replaced before it started): run the workers so the buffered messages drain.
      this.started = true;
      const n = Math.max(1, this.output.maxInFlight);
      for (let i = 0; i < n; i++) this.workers.push(this.work());
    }
    this.draining = true;
    for (const w of this.itemWaiters.splice(0)) w();
    for (const w of this.roomWaiters.splice(0)) w();
    const drained = await Promise.race([Promise.all(this.workers).then(() => 'drained' as const), deadline]);
    clearTimeout(timer);
    this.shorten = undefined;
    if (drained === 'timeout') {
      const left = this.buffer.length + this.inFlight;
      this.logger.warn(
        { api: this.api, stream: this.name, left },
        'stream drain deadline passed: aborting the messages left',
      );
      this.closed = true;
      this.abort.abort(new Error('stream stopped'));
      for (const item of this.buffer.splice(0)) {
        this.release(item);
        await this.settle(item, 'aborted');
      }
      await Promise.all(this.workers);
    }
    this.closed = true;
    this.abort.abort(new Error('stream stopped'));
    for (const p of this.processors) await p.close().catch(() => undefined);
    await this.output.close().catch(() => undefined);
    await this.input.close().catch(() => undefined);
    this.logger.info({ api: this.api, stream: this.name }, 'stream stopped');
  }
}
