/** Listening on HOST:PORT and draining on shutdown. */
import type { Server } from 'node:http';

export function parseHostPort(value: string, flag: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(value);
  if (!m || Number(m[2]) > 65535) throw new Error(`${flag}: expected HOST:PORT, got ${JSON.stringify(value)}`);
  return { host: m[1] || '0.0.0.0', port: Number(m[2]) };
}

export function listen(server: Server, hostPort: string, flag: string): Promise<string> {
  const { host, port } = parseHostPort(hostPort, flag);
  return new Promise((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`${flag}: cannot listen on ${hostPort}: ${e.message}`)));
    server.listen(port, host, () => {
      const a = server.address();
      resolve(typeof a === 'object' && a ? `${host}:${a.port}` : hostPort);
    });
  });
}

/** Stop accepting, let in-flight requests finish up to the deadline, then force-close. */
export async function drain(server: Server, deadlineMs = 10_000): Promise<void> {
  if (!server.listening) return;
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), deadlineMs);
  await closed;
  clearTimeout(timer);
}
