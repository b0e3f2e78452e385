/**
 * The stream component contracts. A pipeline moves Messages from one Input through Processors to one
 * Output; the input learns the fate of each message through its Ack callback.
 */
import type { Logger } from '../lib/logger.js';

export interface Message {
  /** Unique within the stream (the Redis entry id for redis_streams). */
  id: string;
  /** Parsed JSON when the payload was JSON, else the payload as a string. */
  body: unknown;
  /**
   * The payload as received and not parsed yet (http_server): the pipeline parses it into `body` when a
   * worker takes the message, so its buffer holds the bytes that are counted against its byte bound
   * rather than a parsed value several times their size (streams/body.ts). A payload of
   * LARGE_BODY_BYTES or more stays as bytes after that too: the components that need its parsed form
   * have the body thread work on it (streams/body-thread.ts); `body` is then undefined.
   */
  raw?: Buffer;
  /** `raw` is JSON as the body thread serialised it (an output sends it as it is), not a payload as received. */
  rawJson?: boolean;
  meta: Record<string, string>;
}

/**
 * What became of a message:
 * - delivered: the output succeeded (or a drop/stdout output took it);
 * - rejected: refused for good (a processor error, or a 4xx other than 408/429 from the peer) — retrying
 *   cannot help, so the input acknowledges it anyway and it is counted as failed;
 * - failed: retries exhausted (max_retries > 0) — the input should redeliver it later if it can;
 * - aborted: the pipeline stopped before the message was done (drain deadline) — redeliver if possible.
 */
export type Outcome = 'delivered' | 'rejected' | 'failed' | 'aborted';
export type Ack = (outcome: Outcome) => void | Promise<void>;

/** Handed to an input when it is built: how it hands messages to its pipeline. */
export interface InputContext {
  /** Non-blocking: false when the pipeline's buffer is full or closed (http_server → 503). */
  offer(msg: Message, ack: Ack): boolean;
  /** Holds room for a body of `bytes` being read (http_server refuses before reading): its release, or undefined. */
  reserve(bytes: number): (() => void) | undefined;
  /** Waits for room in the buffer (backpressure); rejects when `signal` aborts or the pipeline closes. */
  push(msg: Message, ack: Ack, signal: AbortSignal): Promise<void>;
  logger: Logger;
}

export interface Input {
  readonly type: string;
  /** Buffer size the pipeline gives this input. */
  readonly bufferSize: number;
  /** Bytes of raw payloads (Message.raw) its buffer may hold; none: no byte bound of its own. */
  readonly bufferBytes?: number;
  /** Begins producing (no-op for http_server, which is fed through the manager's tryHandle). */
  start(): Promise<void>;
  /** Stops producing; messages already handed over are still acked afterwards. */
  stop(): Promise<void>;
  /** Releases resources (connections); called after the pipeline drained. */
  close(): Promise<void>;
}

export interface Processor {
  readonly type: string;
  process(msg: Message, signal: AbortSignal): Promise<Message>;
  close(): Promise<void>;
}

export interface Output {
  readonly type: string;
  /** Messages the pipeline may have in this output at once (1 keeps the input order). */
  readonly maxInFlight: number;
  write(msg: Message, signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** A failure that retrying cannot fix: the message is rejected (acked and counted as failed). */
export class PermanentError extends Error {
  override readonly name = 'PermanentError';
}

/** Retries exhausted: the message failed (the input may redeliver it). */
export class RetriesExhaustedError extends Error {
  override readonly name = 'RetriesExhaustedError';
}
