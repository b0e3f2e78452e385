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

  /** Reads the body and offers the message; answers the client. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    // the nesting scan runs on each chunk as it arrives (one socket read, ≤ 64 KiB): never one pass over
    // the whole body in one turn of the event loop. Only a body opening like JSON is scanned.
    let json: boolean | undefined;
    const scanner = new JsonDepthScanner();
    req.on('data', (c: Buffer) => {
      if (tooLarge) return;
      size += c.length;
      if (size > this.options.max_body_bytes) {
        tooLarge = true;
        send(res, 413, { error: 'Message too large' }, { connection: 'close' });
        req.resume();
        return;
      }
      if (scanner.pastAt >= 0) return; // refused once the body has ended: the rest is not kept
      chunks.push(c);
      json ??= opensJson(c);
      if (json) scanner.feed(c);
    });
    req.on('error', () => {
      if (!res.headersSent) send(res, 400, { error: 'Bad request' });
    });
    req.on('end', () => {
      if (tooLarge || res.headersSent) return;
      if (this.stopped) {
        send(res, 503, { error: 'Stream is stopping' }, { 'retry-after': String(this.retryAfterSeconds) });
        return;
      }
      if (scanner.pastAt >= 0) {
        send(res, 400, { error: `Message body nested deeper than ${MAX_JSON_DEPTH} levels` });
        return;
      }
      const raw = Buffer.concat(chunks, size);
      const id = `${this.stream}-${Date.now().toString(36)}-${(seq++).toString(36)}`;
      const msg: Message = { id, body: undefined, raw, meta: { http_path: req.url ?? '' } };
      // the request's trace context (or a new trace), continued by every http_client call for this message
      msg.meta.traceparent = childTraceparent(req.headers.traceparent);
      if (this.ctx.offer(msg, () => undefined)) {
        send(res, 202, { status: 'accepted', id });
      } else {
        send(res, 503, { error: 'Stream buffer full' }, { 'retry-after': String(this.retryAfterSeconds) });
      }
    });
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {
    this.stopped = true;
  }

  async close(): Promise<void> {}
}
