/**
 * A request node:http cannot parse (a header over the size limit, a control character, a malformed
 * request line, a request that timed out) is answered by node itself with an empty body. This answers it
 * with the server's JSON error body instead, then closes the connection as node does.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const ANSWERS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
};

export function answerClientErrorsWithJson(server: Server, body: (status: number, reason: string) => unknown): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, reason] = ANSWERS[err.code ?? ''] ?? [400, 'Bad Request'];
    const text = JSON.stringify(body(status, reason));
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
    );
  });
}
