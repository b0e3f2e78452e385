/**
 * http_server input: one message per POST to the API's listen path + `path`, fed by the stream manager's
 * tryHandle(). Accepted into the pipeline buffer → 202 {"status":"accepted","id"}; buffer full → 503 with
 * Retry-After (also once its bodies waiting hold max_pending_bytes, or the process's stream budget is
 * used up); body over max_body_bytes → 413; a body opening like JSON (`{` or `[`) and nested deeper than
 * MAX_JSON_DEPTH → 400, found by a linear scan of each chunk as it arrives, before anything is parsed.
 * The JSON body is the message (a non-JSON body is kept as a string), parsed when the pipeline takes it.
 * Acknowledgement is the 202 itself: the message is the gateway's from then on.
 */
import { JsonDepthScanner, MAX_JSON_DEPTH } from '../../lib/json-depth.js';
import { LARGE_BODY_BYTES, bodyThread } from '../body-thread.js';
import { childTraceparent } from '../../lib/trace/trace-context.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpServerInputT } from '../../crds/schemas/streaming.js';
import type { Input, InputContext, Message } from '../types.js';

let seq = 0;

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** The request's content-length, when it declares one (node:http has refused a malformed one). */
function contentLength(req: IncomingMessage): number | undefined {
  const v = req.headers['content-length'];
  if (v === undefined || req.headers['transfer-encoding'] !== undefined) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** The body's first non-blank byte in `buf`: whether it opens a JSON array or object; undefined: all blank. */
function opensJson(buf: Buffer): boolean | undefined {
  for (const c of buf) {
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) continue;
    return c === 0x7b || c === 0x5b;
  }
  return undefined;
}

export class HttpServerInput implements Input {
  readonly type = 'http_server';
  readonly bufferSize: number;
  readonly bufferBytes: number;
  private stopped = false;

  constructor(
    readonly options: HttpServerInputT,
    private readonly ctx: InputContext,
    private readonly stream: string,
    /** Seconds a refused client should wait (Retry-After of the 503). */
    private readonly retryAfterSeconds = 1,
  ) {
    this.bufferSize = options.max_pending;
    this.bufferBytes = options.max_pending_bytes;
  }

  private busy(res: ServerResponse, why: string): void {
    send(res, 503, { error: why }, { 'retry-after': String(this.retryAfterSeconds) });
  }

  /**
   * Reads the body and offers the message; answers the client. On the event loop each body costs its
   * socket reads and one copy into a buffer of its size: a body declaring a content-length the buffer
   * has no room for is answered 503 before it is read and then discarded unkept and unscanned; the
   * nesting scan runs inline on the first LARGE_BODY_BYTES only (a deep body is refused after its first
   * bytes), the scan of a larger body runs in the body thread (its bytes moved there and back).
   */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const declared = contentLength(req);
    if (declared !== undefined && declared > this.options.max_body_bytes) {
      send(res, 413, { error: 'Message too large' }, { connection: 'close' });
      req.resume();
      return;
    }
    if (this.stopped) {
      this.busy(res, 'Stream is stopping');
      req.resume();
      return;
    }
    if (declared !== undefined && !this.ctx.hasRoom(declared)) {
      this.busy(res, 'Stream buffer full');
      req.resume(); // read and dropped: neither kept nor scanned
      return;
    }
    // a declared length is read straight into its own buffer (one copy per chunk, no concat, and memory
    // the body thread can take); a chunked body is collected and joined once
    const into = declared !== undefined && declared > 0 ? Buffer.allocUnsafeSlow(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    // the inline scan: each chunk as it arrives (one socket read, ≤ 64 KiB), up to LARGE_BODY_BYTES
    let json: boolean | undefined;
    const scanner = new JsonDepthScanner();
    req.on('data', (c: Buffer) => {
      if (tooLarge) return;
      const at = size;
      size += c.length;
      if (size > this.options.max_body_bytes || (into && size > into.length)) {
        tooLarge = true;
        send(res, 413, { error: 'Message too large' }, { connection: 'close' });
        req.resume();
        return;
      }
      if (scanner.pastAt >= 0) return; // refused once the body has ended: the rest is not kept
      if (into) c.copy(into, at);
      else chunks.push(c);
      json ??= opensJson(c);
      if (json && at < LARGE_BODY_BYTES) scanner.feed(c);
    });
    req.on('error', () => {
      if (!res.headersSent) send(res, 400, { error: 'Bad request' });
    });
    req.on('end', () => {
      if (tooLarge || res.headersSent) return;
      if (scanner.pastAt >= 0) {
        send(res, 400, { error: `Message body nested deeper than ${MAX_JSON_DEPTH} levels` });
        return;
      }
      const raw = into ? into.subarray(0, size) : Buffer.concat(chunks, size);
      if (!json || scanner.bytesSeen >= size) {
        this.accept(req, res, raw);
        return;
      }
      bodyThread.scan(raw).then(
        (r) => {
          if (r.pastAt >= 0) send(res, 400, { error: `Message body nested deeper than ${MAX_JSON_DEPTH} levels` });
          else this.accept(req, res, r.bytes);
        },
        (e: Error) => {
          this.ctx.logger.warn({ stream: this.stream, err: e.message }, 'stream intake: the nesting scan failed');
          this.busy(res, 'Stream busy');
        },
      );
    });
  }

  /** Offers a body that passed the nesting scan: 202, or 503 when the buffer has no room (any longer). */
  private accept(req: IncomingMessage, res: ServerResponse, raw: Buffer): void {
    if (res.destroyed) return;
    if (this.stopped) {
      this.busy(res, 'Stream is stopping');
      return;
    }
    const id = `${this.stream}-${Date.now().toString(36)}-${(seq++).toString(36)}`;
    const msg: Message = { id, body: undefined, raw, meta: { http_path: req.url ?? '' } };
    // the request's trace context (or a new trace), continued by every http_client call for this message
    msg.meta.traceparent = childTraceparent(req.headers.traceparent);
    if (this.ctx.offer(msg, () => undefined)) send(res, 202, { status: 'accepted', id });
    else this.busy(res, 'Stream buffer full');
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {
    this.stopped = true;
  }

  async close(): Promise<void> {}
}
