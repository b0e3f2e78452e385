/**
 * A tiny demo upstream for `make run` and the tests: answers every request with a JSON echo of
 * method, path, headers and body.   node dist/scripts/echo-upstream.js [PORT]
 */
import { createServer, type Server } from 'node:http';

export function createEchoServer(): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify({
        method: req.method,
        path: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
}

export async function startEcho(port = 0, host = '127.0.0.1'): Promise<{ server: Server; url: string }> {
  const server = createEchoServer();
  await new Promise<void>((r) => server.listen(port, host, r));
  const a = server.address();
  return { server, url: `http://${host}:${typeof a === 'object' && a ? a.port : port}` };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.argv[2] ?? 9090);
  startEcho(port).then(({ url }) => console.log(`echo upstream listening on ${url}`));
}
