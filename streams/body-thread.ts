/**
 * Large stream payloads are parsed, edited and serialised off the event loop (docs/streams.md, "Large
 * bodies"). A payload of LARGE_BODY_BYTES or more stays as bytes on the gateway's thread (Message.raw);
 * the components that need its parsed form hand it to one worker thread (streams/body-worker.ts) with
 * the edits to make (mapping processors, an http_client processor's result_field) and get bytes back:
 * serialised JSON (Message.rawJson), or the text of a payload that is not JSON. Below the threshold the
 * pipeline parses inline (JSON.parse of 64 KiB takes ~1 ms), which costs less than the copy to a thread.
 *
 * A parsed value cannot come back cheaply: structuredClone of a 1 MB body of 130,000 small objects took
 * 130–240 ms, 5× its JSON.parse. Hence the thread returns bytes, and an output sends them as they are.
 *
 * The thread starts on the first large payload, does not keep the process alive, and runs one job at a
 * time (one body's parsed form in its heap at once). Its heap is capped (BODY_THREAD_HEAP_MB): a job that
 * exceeds it ends the thread, that job and the ones queued fail (PermanentError: retrying would do the
 * same) and the next job starts a new thread.
 */
import type { Worker as WorkerT } from 'node:worker_threads';
import type { MappingProcessorT } from '../crds/schemas/streaming.js';
import { encodeBody, type Encoded } from './http-call.js';
import { PermanentError, type Message } from './types.js';

const { Worker } = process.getBuiltinModule('node:worker_threads');

/** Payloads from this size up are handled by the body thread; smaller ones are parsed inline. */
export const LARGE_BODY_BYTES = 64 * 1024;

/** Old-generation heap of the body thread, MB: a 1 MiB body of the smallest objects parses to ~20 MB. */
export const BODY_THREAD_HEAP_MB = 64;

/** One edit the thread makes on the parsed body, in order. */
export type BodyOp = { mapping: MappingProcessorT } | { set: { path: string; text: string } };

/** Parse `raw`, apply `ops`, serialise the result. */
export interface EditJob {
  id: number;
  kind: 'edit';
  raw: Uint8Array;
  ops: BodyOp[];
}

/** The nesting scan of a request body (lib/json-depth.ts): the bytes go to the thread and come back. */
export interface ScanJob {
  id: number;
  kind: 'scan';
  raw: Uint8Array;
}

export type BodyJob = EditJob | ScanJob;

export type BodyReply =
  | { id: number; kind: 'json' | 'text'; bytes: Uint8Array }
  | { id: number; kind: 'scanned'; bytes: Uint8Array; pastAt: number }
  | { id: number; kind: 'rejected'; message: string };

export interface BodyResult {
  kind: 'json' | 'text';
  bytes: Buffer;
}

export interface ScanResult {
  /** The bytes scanned, handed back (the same memory, moved to the thread and back). */
  bytes: Buffer;
  /** Offset of the first bracket past MAX_JSON_DEPTH, or -1. */
  pastAt: number;
}

/** A Buffer over exactly its own ArrayBuffer, which can be moved to the thread (a pooled slice cannot). */
const ownsMemory = (b: Uint8Array): boolean =>
  b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && b.buffer instanceof ArrayBuffer;

const asBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

interface Pending {
  resolve: (r: Exclude<BodyReply, { kind: 'rejected' }>) => void;
  reject: (e: Error) => void;
}

class BodyThread {
  private worker: WorkerT | undefined;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;

  private start(): WorkerT {
    const w = new Worker(new URL('./body-worker.js', import.meta.url), {
      resourceLimits: { maxOldGenerationSizeMb: BODY_THREAD_HEAP_MB, maxYoungGenerationSizeMb: 8 },
      stdout: false,
      stderr: false,
    });
    w.unref();
    w.on('message', (r: BodyReply) => {
      const p = this.pending.get(r.id);
      if (!p) return;
      this.pending.delete(r.id);
      if (r.kind === 'rejected') p.reject(new PermanentError(r.message));
      else p.resolve(r);
    });
    const fail = (why: string): void => {
      if (this.worker !== w) return;
      this.worker = undefined;
      const err = new PermanentError(`stream body thread ${why}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    w.on('error', (e: Error & { code?: string }) =>
      fail(
        e.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? `ran out of its ${BODY_THREAD_HEAP_MB} MB heap on a body`
          : `failed: ${e.message}`,
      ),
    );
    w.on('exit', (code) => fail(`exited (code ${code})`));
    return w;
  }

  private post(job: BodyJob): Promise<Exclude<BodyReply, { kind: 'rejected' }>> {
    const w = (this.worker ??= this.start());
    return new Promise((resolve, reject) => {
      this.pending.set(job.id, { resolve, reject });
      // the bytes are moved, not cloned: the copy made for the thread (or the buffer itself) is detached here
      w.postMessage(job, [job.raw.buffer as ArrayBuffer]);
    });
  }

  /**
   * Parses `raw` in the thread, applies `ops`, and returns the result serialised. The thread gets a copy
   * (one memcpy, ~0.1 ms per MB; the message keeps its bytes for a retry), moved rather than cloned.
   */
  async run(raw: Uint8Array, ops: BodyOp[]): Promise<BodyResult> {
    const r = await this.post({ id: this.seq++, kind: 'edit', raw: new Uint8Array(raw), ops });
    if (r.kind === 'scanned') throw new PermanentError('stream body thread: a scan reply to an edit');
    return { kind: r.kind, bytes: asBuffer(r.bytes) };
  }

  /**
   * The nesting scan of `raw` in the thread: its memory moves there and back (no copy when it owns its
   * ArrayBuffer, as a body read into Buffer.allocUnsafeSlow does); `raw` is detached once this is called.
   */
  async scan(raw: Buffer): Promise<ScanResult> {
    const bytes = ownsMemory(raw) ? raw : new Uint8Array(raw);
    const r = await this.post({ id: this.seq++, kind: 'scan', raw: bytes });
    if (r.kind !== 'scanned') throw new PermanentError('stream body thread: an edit reply to a scan');
    return { bytes: asBuffer(r.bytes), pastAt: r.pastAt };
  }
}

/** The process's body thread (started on first use). */
export const bodyThread = new BodyThread();

/** Whether a payload of this many bytes goes to the body thread rather than being parsed inline. */
export const isLarge = (bytes: Uint8Array | string): boolean =>
  (typeof bytes === 'string' ? bytes.length : bytes.byteLength) >= LARGE_BODY_BYTES;

/** The bytes an output sends for a message: the thread serialises a payload kept as bytes. */
export async function encodeMessage(msg: Message): Promise<Encoded> {
  if (msg.raw === undefined) return encodeBody(msg.body);
  if (msg.rawJson) return { payload: msg.raw, contentType: 'application/json' };
  const r = await bodyThread.run(msg.raw, []);
  return {
    payload: r.bytes,
    contentType: r.kind === 'json' ? 'application/json' : 'text/plain; charset=utf-8',
  };
}

/** A message whose body is the thread's result (serialised JSON) of `ops` applied to its payload. */
export async function editInThread(msg: Message, raw: Uint8Array, ops: BodyOp[]): Promise<Message> {
  const r = await bodyThread.run(raw, ops);
  // ops edit objects only (a payload that is not a JSON object is rejected), so the result is JSON
  return { id: msg.id, body: undefined, raw: r.bytes, rawJson: true, meta: msg.meta };
}
