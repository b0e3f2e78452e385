/**
 * HTTP/1.1 pipelining served one request at a time per connection, as nginx serves it (docs/proxy.md,
 * "Slow clients and connection caps"). node:http parses every request a client pipelines and hands them
 * over at once; each would begin its upstream call, so one connection that never read its answers held
 * any number of calls and upstream connections. A request behind another on its connection is one whose
 * response node has not given the socket yet (res.socket null): it is handled when node does (the
 * response's 'socket' event, once the answer ahead of it has finished). Past `max` waiting on one
 * connection, the connection is closed. Only pipelined requests pay for this.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const WAITING = Symbol('gw.pipelinedWaiting');
type Counted = Socket & { [WAITING]?: number };

export function oneAtATime(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  max: number,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (res.socket !== null) return handler(req, res);
    const socket = req.socket as Counted;
    const waiting = (socket[WAITING] ?? 0) + 1;
    if (waiting > max) {
      socket.destroy(); // the answers not yet sent are lost with it: the client retries them
      return;
    }
    socket[WAITING] = waiting;
    res.once('socket', () => {
      socket[WAITING] = socket[WAITING]! - 1;
      handler(req, res);
    });
  };
}
