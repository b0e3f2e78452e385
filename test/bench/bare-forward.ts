/** The bare proxies' HTTP/1.1 pass-through (bare-proxy.ts, bare-protocols.ts tls): undici's stream(), nothing else. */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Pool } from 'undici';

export function passThrough(pool: Pool): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const body = req.method === 'GET' || req.method === 'HEAD' ? null : req;
    pool
      .stream(
        { path: req.url ?? '/', method: req.method as 'GET', headers: req.headers, body },
        ({ statusCode, headers }) => {
          res.writeHead(statusCode, headers as OutgoingHttpHeaders);
          return res;
        },
      )
      .catch(() => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
  };
}
