/** Raw-socket clients for the slow-client and connection-cap tests (docs/contract.md#hostile-input). */
import { connect, type Socket } from 'node:net';

export interface SlowHead {
  socket: Socket;
  /** Resolves with everything the server wrote once the connection closes. */
  closed: Promise<string>;
}

/** A connection from `localAddress` that sends a request head slowly: one header line every `everyMs`, never the end. */
export function slowHead(base: string, localAddress: string, everyMs = 300, path = '/'): SlowHead {
  const u = new URL(base);
  const socket = connect({ host: u.hostname, port: Number(u.port), localAddress });
  let got = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (got += d));
  socket.on('error', () => undefined);
  socket.on('connect', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n`));
  const timer = setInterval(() => socket.writable && socket.write(`X-Slow-${Date.now()}: 1\r\n`), everyMs);
  const closed = new Promise<string>((r) =>
    socket.once('close', () => {
      clearInterval(timer);
      r(got);
    }),
  );
  return { socket, closed };
}

export interface KeptClient {
  /** Sends GET `path` on the kept connection; resolves with the response's head and body text. */
  ask(path: string): Promise<string>;
  close(): void;
}

/** A keep-alive client connected from `localAddress` before a flood, asking on its one connection. */
export async function keptClient(base: string, localAddress: string): Promise<KeptClient> {
  const u = new URL(base);
  const socket = connect({ host: u.hostname, port: Number(u.port), localAddress });
  await new Promise((r, j) => socket.once('connect', r).once('error', j));
  socket.on('error', () => undefined); // a reset after the test ends must not be uncaught: ask() sees 'close'
  socket.setEncoding('utf8');
  return {
    ask: (path) =>
      new Promise((resolve, reject) => {
        let got = '';
        const on = (d: string): void => {
          got += d;
          const head = got.indexOf('\r\n\r\n');
          if (head === -1) return;
          const len = /content-length: (\d+)/i.exec(got.slice(0, head));
          const done = len ? got.length >= head + 4 + Number(len[1]) : got.endsWith('\r\n0\r\n\r\n');
          if (done) {
            socket.off('data', on);
            resolve(got);
          }
        };
        socket.on('data', on);
        socket.once('close', () => reject(new Error(`the kept connection closed; got ${JSON.stringify(got)}`)));
        socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      }),
    close: () => socket.destroy(),
  };
}
