/**
 * The connection a request came over. For an HTTP/2 request, node:http2's compatibility API makes
 * `req.socket` a Proxy of the request's stream on first use (one object per request, and a trap on every
 * read); these read the stream and its session's socket directly (made once per connection).
 */
import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { Socket } from 'node:net';

/** The client's TCP (or TLS) connection; null once node has let go of it. */
export function connectionOf(req: IncomingMessage): Socket | null {
  if (req.httpVersionMajor !== 2) return req.socket as Socket | null;
  return ((req as unknown as Http2ServerRequest).stream.session?.socket as Socket | undefined) ?? null;
}

/** The request's own transport is gone: its HTTP/1.x connection, or its HTTP/2 stream. */
export function transportGone(req: IncomingMessage): boolean {
  if (req.httpVersionMajor === 2) return (req as unknown as Http2ServerRequest).stream.destroyed;
  const socket = req.socket as Socket | null;
  return socket === null || socket.destroyed;
}
