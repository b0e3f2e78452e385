/** Listening on HOST:PORT and draining on shutdown. */
import type { Server } from 'node:http';

/** HOST:PORT, an IPv6 host in brackets (`[::]:8080`, `[::1]:8080`); the host is returned without them. */
export function parseHostPort(value: string, flag: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(value);
  if (!m || Number(m[2]) > 65535) throw new Error(`${flag}: expected HOST:PORT, got ${JSON.stringify(value)}`);
  const host = /^\[(.*)\]$/.exec(m[1]!)?.[1] ?? m[1];
  return { host: host || '0.0.0.0', port: Number(m[2]) };
}

/** HOST:PORT as a URL authority: an IPv6 host in brackets. */
export const hostPort = (host: string, port: number | string): string =>
  host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;

export function listen(server: Server, address: string, flag: string): Promise<string> {
  const { host, port } = parseHostPort(address, flag);
  return new Promise((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`${flag}: cannot listen on ${address}: ${e.message}`)));
    server.listen(port, host, () => {
      const a = server.address();
      resolve(hostPort(host, typeof a === 'object' && a ? a.port : port));
    });
  });
}

/** Emitted on a server when its drain deadline passes: connections node:http no longer tracks (upgraded ones) close on it. */
export const DRAIN_DEADLINE = 'gw:drain-deadline';

/** Stop accepting, let in-flight requests finish up to the deadline, then force-close. */
export async function drain(server: Server, deadlineMs = 10_000): Promise<void> {
  if (!server.listening) return;
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  const timer = setTimeout(() => {
    server.closeAllConnections();
    server.emit(DRAIN_DEADLINE);
  }, deadlineMs);
  await closed;
  clearTimeout(timer);
}
