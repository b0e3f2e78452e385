/* global process, setTimeout, Buffer */
// Echo upstream of the e2e suite: answers every request with 200 and a JSON body naming the pod
// (HOSTNAME), the method, the path and the request headers. PORT (default 8080). SIGTERM closes it.
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 8080);
const server = createServer((req, res) => {
  const body = JSON.stringify({ pod: process.env.HOSTNAME, method: req.method, path: req.url, headers: req.headers });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
});
server.listen(port, '0.0.0.0');
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  setTimeout(() => process.exit(0), 5000).unref();
});
