/**
 * Streaming reverse proxy to the upstream over undici Pools (keep-alive, one Pool per origin).
 * Hop-by-hop headers are dropped, X-Forwarded-* added, upstream X-RateLimit-* replaced by ours.
 */
import type { IncomingMessage, ServerResponse, OutgoingHttpHeaders } from 'node:http';
import { Pool, errors } from 'undici';
import { ERRORS, sendJson } from './respond.js';

const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'trailers',
  'transfer-encoding', 'upgrade', 'host', 'http2-settings',
]);

export interface UpstreamOptions {
  timeoutMs: number;
}

export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  constructor(private readonly opts: UpstreamOptions) {}

  pool(origin: string): Pool {
    let p = this.pools.get(origin);
    if (!p) {
      p = new Pool(origin, {
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      this.pools.set(origin, p);
    }
    return p;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

function requestHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const drop = new Set([...HOP_BY_HOP, ...connectionTokens(req.headers.connection)]);
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || drop.has(k)) continue;
    out[k] = v;
  }
  const ip = req.socket.remoteAddress ?? '';
  const prior = req.headers['x-forwarded-for'];
  out['x-forwarded-for'] = prior ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${ip}` : ip;
  out['x-forwarded-proto'] = (req.headers['x-forwarded-proto'] as string | undefined) ?? 'http';
  if (req.headers.host) out['x-forwarded-host'] = (req.headers['x-forwarded-host'] as string | undefined) ?? req.headers.host;
  return out;
}

function connectionTokens(value: string | string[] | undefined): string[] {
  if (!value) return [];
  return (Array.isArray(value) ? value.join(',') : value).split(',').map((h) => h.trim().toLowerCase());
}

function responseHeaders(raw: Record<string, string | string[] | undefined>, extra: Record<string, string>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const named = new Set(connectionTokens(raw.connection ?? raw.Connection));
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined) continue;
    const lk = k.toLowerCase();
    if (HOP_BY_HOP.has(lk) || named.has(lk) || lk.startsWith('x-ratelimit-')) continue;
    out[lk] = v;
  }
  return { ...out, ...extra };
}

/** Forwards req to origin+path and streams the answer into res. Never throws. */
export async function forward(
  upstreams: Upstreams,
  origin: string,
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
  extraHeaders: Record<string, string>,
): Promise<number> {
  const ac = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) ac.abort();
  };
  res.once('close', onClose);
  const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
  let status = 502;
  try {
    await upstreams.pool(origin).stream(
      {
        path,
        method: (req.method ?? 'GET') as 'GET',
        headers: requestHeaders(req),
        body: hasBody ? req : null,
        signal: ac.signal,
      },
      ({ statusCode, headers }) => {
        status = statusCode;
        res.writeHead(statusCode, responseHeaders(headers, extraHeaders));
        return res;
      },
    );
  } catch (e) {
    if (!res.headersSent) {
      const timeout = e instanceof errors.HeadersTimeoutError || e instanceof errors.BodyTimeoutError;
      status = timeout ? 504 : 502;
      sendJson(res, status, { error: timeout ? ERRORS.timeout : ERRORS.upstream });
    } else {
      res.destroy();
    }
  } finally {
    res.off('close', onClose);
  }
  return status;
}
