/**
 * Run with --expose-gc: writes 8 × MAX_BUFFERED_BYTES of access lines to a pipe whose reader never reads, then
 * prints {written, grown, dropped, reader} as JSON (the heap growth after a forced GC, the reader's pid) and exits, its
 * access log flushing at exit. Argument `closed`: the reader is killed first, so the flush meets a closed pipe;
 * otherwise the reader is left running (stalled) and the caller kills it.
 */
import { accessLine, createAccessLog, MAX_BUFFERED_BYTES, type AccessRecord } from '../../sidecar/proxy/access-log.js';
const { spawn } = process.getBuiltinModule('node:child_process');

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('stalled-access-log: run with --expose-gc');
const record: AccessRecord = {
  api_id: 'orders',
  method: 'GET',
  path: '/orders/42',
  status: 200,
  latency_ms: 1.25,
  upstream_latency_ms: 0.75,
  decision: 'allow',
  key: null,
  trace_id: '0af7651916cd43dd8448eb211c80319c',
  client_ip: '127.0.0.1',
  protocol: '1.1',
};

const reader = spawn('sleep', ['60'], { stdio: ['pipe', 'ignore', 'ignore'] });
const fd = (reader.stdin as unknown as { _handle: { fd: number } })._handle.fd;
let dropped = 0;
const log = createAccessLog(fd, (n) => (dropped += n));
gc();
const before = process.memoryUsage();
const line = accessLine(record, Date.now()).length;
const n = Math.ceil((8 * MAX_BUFFERED_BYTES) / line);
for (let i = 0; i < n; i++) {
  log.write(record);
  if (i % 10_000 === 0) await new Promise((r) => setImmediate(r));
}
await new Promise((r) => setTimeout(r, 50));
gc();
const after = process.memoryUsage();
const grown = after.heapUsed + after.external - (before.heapUsed + before.external);
process.stdout.write(JSON.stringify({ written: n * line, grown, dropped, reader: reader.pid }) + '\n');
if (process.argv[2] === 'closed') {
  reader.kill('SIGKILL');
  await new Promise((r) => reader.once('exit', r));
}
process.exit(0);
