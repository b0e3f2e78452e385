/** The bare Node.js baseline of `make bench`: node:http + an undici Pool, pass-through, nothing else. */
import { createServer, type OutgoingHttpHeaders } from 'node:http';
import { Pool } from 'undici';

const pool = new Pool(process.argv[3]!, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
createServer((req, res) => {
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
}).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('bare proxy ready'));
