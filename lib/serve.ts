/** Listening on HOST:PORT with slow-client and connection bounds (docs/contract.md#hostile-input), and draining on shutdown. */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { GroupCounts } from './ip/group-counts.js';
import { ADMIN_KEEP_ALIVE_MS } from './tuning.js';

const { ServerResponse: Response } = process.getBuiltinModule('node:http');

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

/**
 * The bounds of a listener (docs/contract.md#hostile-input): a client that sends its request head slowly is cut (408, then
 * closed), and open connections are counted, in total and per client address (addressGroup): past either
 * cap a new connection is closed as soon as it is accepted, while the connections already open are served.
 */
export interface ListenerLimits {
  /** ms to send a whole request head; default 60 s. */
  headersTimeoutMs?: number;
  /** ms for a whole request (head and body); 0 = none; default: the server's own. */
  requestTimeoutMs?: number;
  /** Open connections at once; default 1024 (the gateway's: max_connections). */
  maxConnections?: number;
  /** Open connections of one client address group; default 256 (the gateway's: max_connections_per_client). */
  maxConnectionsPerClient?: number;
  /**
   * ms an idle keep-alive connection is kept (announced as `Keep-Alive: timeout=N`); default
   * ADMIN_KEEP_ALIVE_MS (lib/tuning.ts: longer than the idle pools of clients that ignore the hint).
   */
  keepAliveTimeoutMs?: number;
}

export const DEFAULT_LISTENER_LIMITS = {
  headersTimeoutMs: 60_000,
  maxConnections: 1024,
  maxConnectionsPerClient: 256,
  keepAliveTimeoutMs: ADMIN_KEEP_ALIVE_MS,
} as const;

/** The open connections of each bounded server, for the drain to reach the responses they are writing. */
const openSockets = new WeakMap<Server, Set<Socket>>();

/** Applies `limits` to a server before it listens (every server process's listeners go through listen()). */
export function boundListener(server: Server, limits: ListenerLimits = {}): void {
  const headersMs = limits.headersTimeoutMs ?? DEFAULT_LISTENER_LIMITS.headersTimeoutMs;
  server.headersTimeout = headersMs;
  if (limits.requestTimeoutMs !== undefined) server.requestTimeout = limits.requestTimeoutMs;
  // node:http requires headersTimeout ≤ requestTimeout when both are set
  if (server.requestTimeout > 0 && server.requestTimeout < headersMs) server.requestTimeout = headersMs;
  // node looks for expired heads every connectionsCheckingInterval (30 s by default: a 60 s cut came at
  // up to 90 s); read when the server starts listening
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(
    5000,
    Math.max(100, Math.floor(headersMs / 12)),
  );
  server.maxConnections = limits.maxConnections ?? DEFAULT_LISTENER_LIMITS.maxConnections;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs ?? DEFAULT_LISTENER_LIMITS.keepAliveTimeoutMs;
  const perClient = limits.maxConnectionsPerClient ?? DEFAULT_LISTENER_LIMITS.maxConnectionsPerClient;
  const open = new GroupCounts(perClient);
  const sockets = new Set<Socket>();
  openSockets.set(server, sockets);
  server.on('connection', (socket: Socket) => {
    const leave = open.enter(socket.remoteAddress);
    if (leave === undefined) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      leave();
    });
  });
}

export function listen(server: Server, address: string, flag: string, limits?: ListenerLimits): Promise<string> {
  const { host, port } = parseHostPort(address, flag);
  boundListener(server, limits);
  return new Promise((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`${flag}: cannot listen on ${address}: ${e.message}`)));
    server.listen(port, host, () => {
      const a = server.address();
      resolve(hostPort(host, typeof a === 'object' && a ? a.port : port));
    });
  });
}

/** Until when (epoch ms) each server's responses close their connection: the drain's advance notice. */
const closingUntil = new WeakMap<Server, number>();

/**
 * For the next `ms`, every response closes its connection (`Connection: close`) while the server keeps
 * accepting: the advance notice of a drain (the sidecar's preStop hook, docs/helm.md "Termination"). A
 * keep-alive client then opens its next connection anew, which the Service sends to a pod that stays,
 * before the drain closes what is left idle; idle connections are not closed here (a client reusing one
 * at that instant would get a reset). Afterwards the server keeps connections alive again.
 */
export function closeConnectionsFor(server: Server, ms: number): void {
  if (!closingUntil.has(server)) {
    server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
      if (Date.now() < (closingUntil.get(server) ?? 0)) res.shouldKeepAlive = false;
    });
  }
  closingUntil.set(server, Math.max(closingUntil.get(server) ?? 0, Date.now() + ms));
}

/** Emitted on a server when its drain deadline passes: connections node:http no longer tracks (upgraded ones) close on it. */
export const DRAIN_DEADLINE = 'gw:drain-deadline';

/** How often a draining server closes the keep-alive connections that went idle since the last look. */
const DRAIN_SWEEP_MS = 25;

/**
 * Stop accepting, let in-flight requests finish up to the deadline, then force-close. While draining, a
 * response carries `Connection: close` (its client opens its next connection elsewhere) and a keep-alive
 * connection is closed as soon as it goes idle, so the process exits when its last response is done, not
 * when an idle client's keep-alive timeout runs out.
 */
export async function drain(server: Server, deadlineMs = 10_000): Promise<void> {
  if (!server.listening) return;
  // first among the request listeners: before a handler that answers synchronously writes its head
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    res.shouldKeepAlive = false;
  });
  // the responses in flight at the signal whose head is not written yet close their connection too
  // (node:http keeps the response a socket is writing as its `_httpMessage`)
  for (const socket of openSockets.get(server) ?? []) {
    const res = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
    if (res instanceof Response && !res.headersSent) res.shouldKeepAlive = false;
  }
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), DRAIN_SWEEP_MS);
  const timer = setTimeout(() => {
    server.closeAllConnections();
    server.emit(DRAIN_DEADLINE);
  }, deadlineMs);
  await closed;
  clearInterval(sweep);
  clearTimeout(timer);
}
