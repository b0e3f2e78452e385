/**
 * Answers given before a request's body was read (401, 403, 404, 413, 429… on an upload): node:http
 * would otherwise read the unread body to its end to reuse the connection, so an unauthenticated client
 * could make the server drain 100 MB. The connection closes after such an answer instead; the client is
 * given a moment and a little more data to read the answer first (a lingering close, as nginx does:
 * destroying a socket with unread input sends a reset that can discard the answer in flight).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { transportGone } from './connection.js';

const LINGER_MS = 1000;
const LINGER_BYTES = 256 * 1024;

export function closeIfBodyUnread(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete) return;
  res.setHeader('connection', 'close');
  res.once('finish', () => {
    const held = req.socket as Socket | null;
    if (held === null) return; // node has let go of the connection: nothing to linger on
    const socket = held;
    const start = socket.bytesRead;
    const timer = setInterval(() => {
      if (socket.destroyed || socket.bytesRead - start > LINGER_BYTES) stop();
    }, 50);
    const deadline = setTimeout(() => stop(), LINGER_MS);
    function stop(): void {
      clearInterval(timer);
      clearTimeout(deadline);
      socket.destroy();
    }
    timer.unref();
    deadline.unref();
  });
}

/**
 * The client went away before its request was over (an abandoned upload, a wait it did not sit out): there
 * is no one to answer. Node may already have let go of the request's socket (null).
 */
export function clientGone(req: IncomingMessage, res: ServerResponse): boolean {
  return res.destroyed || transportGone(req) || (req.destroyed && !req.complete);
}
