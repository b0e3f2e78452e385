/**
 * Upgrade requests (WebSocket and any other `Upgrade:` protocol): after the same routing, key checks and
 * limits as every request (one upgrade = one request), the handshake goes to the upstream; its
 * `101 Switching Protocols` is relayed and the two connections are joined byte for byte until either
 * side closes. An upstream that answers anything else (a 400 or 403 to the handshake) has that answer
 * relayed as an ordinary response. node:http's client makes the handshake (undici's upgrade() cannot
 * relay a refusal).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Forwarding } from './upstream.js';
import { headerObject, requestHeaders, responseHeaders } from './upstream.js';
import { ERRORS, answer } from './respond.js';

const http = process.getBuiltinModule('node:http');
const https = process.getBuiltinModule('node:https');

/** The joined connections of a gateway, destroyed when its drain deadline passes. */
export class Tunnels {
  private readonly open = new Set<Socket>();

  add(a: Socket, b: Socket): void {
    this.open.add(a);
    this.open.add(b);
    const close = (): void => {
      this.open.delete(a);
      this.open.delete(b);
      a.destroy();
      b.destroy();
    };
    for (const s of [a, b]) {
      s.on('error', close);
      s.on('close', close);
    }
  }

  closeAll(): void {
    for (const s of this.open) s.destroy();
    this.open.clear();
  }
}

/** An upgrade request's ServerResponse: written on its raw socket, which it ends when the answer is complete. */
export function upgradeResponse(req: IncomingMessage, socket: Socket): ServerResponse {
  const res = new http.ServerResponse(req);
  res.assignSocket(socket);
  res.shouldKeepAlive = false;
  res.on('finish', () => socket.end());
  return res;
}

export interface UpgradeOptions {
  timeoutMs: number;
  tunnels: Tunnels;
  onError?: (err: Error, f: Forwarding) => void;
}

/** The handshake to origin+path; f.done(f) once it is answered (101 joined, refused, or failed). */
export function forwardUpgrade(origin: string, path: string, f: Forwarding, head: Buffer, o: UpgradeOptions): void {
  const { req, res } = f;
  const u = new URL(origin);
  const headers = {
    ...headerObject(requestHeaders(req, f.traceparent, f.stripHeader)),
    connection: 'upgrade',
    upgrade: String(req.headers.upgrade ?? ''),
  };
  const mod = u.protocol === 'https:' ? https : http;
  const up = mod.request({
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port || undefined,
    method: req.method,
    path,
    headers,
    agent: false,
    timeout: o.timeoutMs,
  });
  let over = false;
  const finish = (status: number, err?: Error): void => {
    if (over) return;
    over = true;
    f.status = status;
    if (err) o.onError?.(err, f);
    f.done(f);
  };
  up.on('upgrade', (upRes: IncomingMessage, upSocket: Socket, upHead: Buffer) => {
    const client = req.socket;
    if (client.destroyed) {
      upSocket.destroy();
      return finish(499);
    }
    up.setTimeout(0);
    upSocket.setTimeout(0);
    const h = responseHeaders(upRes.headers, f.rateLimit, 101);
    let text = `HTTP/1.1 101 ${upRes.statusMessage || 'Switching Protocols'}\r\nconnection: upgrade\r\nupgrade: ${String(upRes.headers.upgrade ?? headers.upgrade)}\r\n`;
    for (let i = 0; i < h.length; i += 2) {
      const v = h[i + 1]!;
      for (const one of Array.isArray(v) ? v : [v]) text += `${h[i] as string}: ${one}\r\n`;
    }
    client.write(`${text}\r\n`, 'latin1'); // header bytes as the upstream sent them (node:http parses latin1)
    if (upHead.length) client.write(upHead);
    if (head.length) upSocket.write(head);
    o.tunnels.add(client, upSocket);
    upSocket.pipe(client);
    client.pipe(upSocket);
    finish(101);
  });
  up.on('response', (upRes: IncomingMessage) => {
    // the upstream declined the upgrade: its answer, as for any request
    const status = upRes.statusCode ?? 502;
    res.writeHead(status, responseHeaders(upRes.headers, f.rateLimit, status));
    upRes.pipe(res);
    finish(status);
  });
  up.on('timeout', () =>
    up.destroy(Object.assign(new Error('upstream did not answer the upgrade in time'), { code: 'UPGRADE_TIMEOUT' })),
  );
  up.on('error', (err: Error) => {
    // the client left before the upstream answered (its close destroyed this request): not the upstream's failure
    if (req.socket.destroyed && !res.headersSent) return finish(499);
    const timeout = (err as { code?: unknown }).code === 'UPGRADE_TIMEOUT';
    if (!res.headersSent) answer(res, timeout ? 504 : 502, { error: timeout ? ERRORS.timeout : ERRORS.upstream });
    else res.destroy();
    finish(timeout ? 504 : 502, err);
  });
  req.socket.once('close', () => up.destroy());
  up.end();
}
