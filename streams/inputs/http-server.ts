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
   * Answers a request whose body is not wanted without reading that body: the answer says
   * `connection: close`, reading stops at once, and the connection is closed once the answer is out,
   * so the bytes still to come never reach the process (reading and dropping them cost the event loop
   * their socket reads and V8 the buffers node allocates for each read: docs/streams.md). An HTTP/2
   * request shares its connection with the session's other streams: its body is read and dropped.
   */
  private refuseUnread(req: IncomingMessage, res: ServerResponse, status: number, why: string): void {
    const headers: Record<string, string> = {};
    if (status === 503) headers['retry-after'] = String(this.retryAfterSeconds);
    if (req.httpVersionMajor !== 1) {
      send(res, status, { error: why }, headers);
      req.resume();
      return;
    }
    headers.connection = 'close';
    const socket = req.socket;
    socket.pause();
    // node's own close (after its 'finish' handler) first resumes reading to drop the body: closed here
    // once the answer is written, before another socket read
    res.once('finish', () => socket.destroy());
    send(res, status, { error: why }, headers);
  }

  /**
   * Reads the body and offers the message; answers the client. On the event loop each body costs its
   * socket reads and one copy into a buffer of its size: a body declaring a content-length the buffer
   * has no room for (room held for the bodies being read counts) is answered 503 before it is read and then
   * discarded unkept and unscanned; the
   * nesting scan runs inline on the first LARGE_BODY_BYTES only (a deep body is refused after its first
   * bytes), the scan of a larger body runs in the body thread (its bytes moved there and back).
   */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const declared = contentLength(req);
    if (declared !== undefined && declared > this.options.max_body_bytes) {
      this.refuseUnread(req, res, 413, 'Message too large');
      return;
    }
    if (this.stopped) {
      this.refuseUnread(req, res, 503, 'Stream is stopping');
      return;
    }
    // room for a declared body is held while it is read: bodies arriving together cannot each pass this
    // check and be read in full only to be refused; released before the offer, or when the body is given up
    const release = declared === undefined ? () => undefined : this.ctx.reserve(declared);
    if (!release) {
      this.refuseUnread(req, res, 503, 'Stream buffer full');
      return;
    }
    res.once('close', release);
    // a declared length is read straight into its own buffer (one copy per chunk, no concat, and memory
    // the body thread can take); a chunked body is collected and joined once
    const into = declared !== undefined && declared > 0 ? Buffer.allocUnsafeSlow(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    // the inline scan: each chunk as it arrives (one socket read, ≤ 64 KiB), up to LARGE_BODY_BYTES
    let json: boolean | undefined;
    const scanner = new JsonDepthScanner();
    req.on('data', (c: Buffer) => {
      if (res.headersSent) return; // refused: the rest is not read
      const at = size;
      size += c.length;
      if (size > this.options.max_body_bytes || (into && size > into.length)) {
        this.refuseUnread(req, res, 413, 'Message too large');
        return;
      }
      if (into) c.copy(into, at);
      else chunks.push(c);
      json ??= opensJson(c);
      if (json && at < LARGE_BODY_BYTES && scanner.feed(c) >= 0)
        this.refuseUnread(req, res, 400, `Message body nested deeper than ${MAX_JSON_DEPTH} levels`);
    });
    req.on('error', () => {
      if (!res.headersSent) send(res, 400, { error: 'Bad request' });
    });
    req.on('end', () => {
      if (res.headersSent) return;
      const raw = into ? into.subarray(0, size) : Buffer.concat(chunks, size);
      if (!json || scanner.bytesSeen >= size) {
        this.accept(req, res, raw, release);
        return;
      }
      bodyThread.scan(raw).then(
        (r) => {
          if (r.pastAt >= 0) send(res, 400, { error: `Message body nested deeper than ${MAX_JSON_DEPTH} levels` });
          else this.accept(req, res, r.bytes, release);
        },
        (e: Error) => {
          this.ctx.logger.warn({ stream: this.stream, err: e.message }, 'stream intake: the nesting scan failed');
          this.busy(res, 'Stream busy');
        },
      );
    });
  }

  /** Offers a body that passed the nesting scan: 202, or 503 when the buffer has no room (any longer). */
  private accept(req: IncomingMessage, res: ServerResponse, raw: Buffer, release: () => void): void {
    release(); // the room held while the body was read: offer() takes it for good, or refuses
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
