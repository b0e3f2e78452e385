/**
 * http_server input: one message per POST to the API's listen path + `path`, fed by the stream manager's
 * tryHandle(). Accepted into the pipeline buffer → 202 {"status":"accepted","id"}; buffer full → 503 with
 * Retry-After; body over max_body_bytes → 413. The JSON body is the message (a non-JSON body is kept as
 * a string). Acknowledgement is the 202 itself: the message is the gateway's from then on.
 */
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

export function parseBody(buf: Buffer): unknown {
  const text = buf.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export class HttpServerInput implements Input {
  readonly type = 'http_server';
  readonly bufferSize: number;
  private stopped = false;

  constructor(
    readonly options: HttpServerInputT,
    private readonly ctx: InputContext,
    private readonly stream: string,
    /** Seconds a refused client should wait (Retry-After of the 503). */
    private readonly retryAfterSeconds = 1,
  ) {
    this.bufferSize = options.max_pending;
  }

  /** Reads the body and offers the message; answers the client. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      if (tooLarge) return;
      size += c.length;
      if (size > this.options.max_body_bytes) {
        tooLarge = true;
        send(res, 413, { error: 'Message too large' }, { connection: 'close' });
        req.resume();
        return;
      }
      chunks.push(c);
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
      const id = `${this.stream}-${Date.now().toString(36)}-${(seq++).toString(36)}`;
      const msg: Message = { id, body: parseBody(Buffer.concat(chunks)), meta: { http_path: req.url ?? '' } };
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
