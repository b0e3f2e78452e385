import { createServer } from 'node:net';

/** Ports this process has handed out: the kernel may give a just-closed port again on the next bind. */
const handedOut = new Set<number>();

function bindZero(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** A free TCP port on 127.0.0.1 (bind to 0, read, close), never one this process was given before. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await bindZero();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** Whether `port` can be bound on 127.0.0.1 now. */
export function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}
