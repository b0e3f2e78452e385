/* global process, setTimeout, Buffer */
// Echo upstream of the e2e suite: answers every request with 200 and a JSON body naming the pod
// (HOSTNAME), when the request arrived, the method, the path and the request headers. A query
// `delay=MS` (at most 60000) holds the answer that long: a slow app. PORT (default 8080). SIGTERM closes it.
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 8080);
const server = createServer((req, res) => {
  // at: when the request reached the app (epoch ms; one node, one clock): when the gateway let it through
  const at = Date.now();
  const body = JSON.stringify({
    pod: process.env.HOSTNAME,
    at,
    method: req.method,
    path: req.url,
    headers: req.headers,
  });
  const delay = Math.min(60000, Number(/[?&]delay=(\d+)/.exec(req.url ?? '')?.[1] ?? 0));
  const answer = () =>
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  if (delay > 0) setTimeout(answer, delay);
  else answer();
});
server.listen(port, '0.0.0.0');
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  setTimeout(() => process.exit(0), 5000).unref();
});
