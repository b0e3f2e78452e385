/**
 * One HTTP/2 stream whose reader stops (docs/proxy.md, "Slow clients and connection caps"), against the real
 * `gw standalone` on its plain listener (h2c). The client keeps reading its socket and grants the
 * connection a large window, but never grants window to its download streams: each such stream's answer
 * stops after its 64 KiB stream window while the connection stays open. The gateway must hold a bounded
 * amount per stuck stream (the upstream is paused), keep serving the other streams of the same connection
 * and other clients, and reset each stuck stream after `http2.send_timeout`, aborting its upstream call.
 */
import { createServer, type Server } from 'node:http';
import { connect as h2connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

const STUCK = 40;
const CONNECTIONS = 4;
const CHUNK = Buffer.alloc(64 * 1024, 'x');

function h2get(session: ClientHttp2Session, path: string): Promise<{ headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const r = session.request({ ':path': path });
    let body = '';
    let headers: IncomingHttpHeaders = {};
    r.on('response', (h) => (headers = h));
    r.on('data', (c: Buffer) => (body += c.toString()));
    r.on('end', () => resolve({ headers, body }));
    r.on('error', reject);
  });
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}
/** HPACK: :method GET, :scheme http, :path <path> and :authority gw (literals with indexed names). */
const get = (path: string): Buffer =>
  Buffer.concat([
    Buffer.from([0x82, 0x86, 0x04, path.length]),
    Buffer.from(path),
    Buffer.from([0x01, 2]),
    Buffer.from('gw'),
  ]);
const windowUpdate = (stream: number, n: number): Buffer => {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(n, 0);
  return frame(8, 0, stream, p);
};

/** A raw client connection: frames parsed as they come, per stream the DATA bytes, END_STREAM, RST_STREAM code. */
class RawConnection {
  readonly data = new Map<number, number>();
  readonly ended = new Set<number>();
  readonly reset = new Map<number, number>();
  goaway = false;
  private buf = Buffer.alloc(0);
  private next = 1;
  readonly socket;
  constructor(port: number) {
    this.socket = netConnect(port, '127.0.0.1');
    this.socket.on('error', () => undefined);
    this.socket.on('data', (d: Buffer) => this.read(d));
  }
  async open(): Promise<void> {
    await new Promise((r) => this.socket.once('connect', r));
    // the connection's window raised to 1 GiB: only the streams' own windows (64 KiB) hold the answers
    this.socket.write(Buffer.concat([PREFACE, frame(4, 0, 0, Buffer.alloc(0)), windowUpdate(0, 1 << 30)]));
  }
  request(path: string): number {
    const id = this.next;
    this.next += 2;
    this.socket.write(frame(1, 0x5, id, get(path)));
    return id;
  }
  private read(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) return;
      const [type, flags] = [this.buf[3]!, this.buf[4]!];
      const stream = this.buf.readUInt32BE(5) & 0x7fffffff;
      const payload = this.buf.subarray(9, 9 + len);
      this.buf = this.buf.subarray(9 + len);
      if (type === 4 && !(flags & 1)) this.socket.write(frame(4, 1, 0, Buffer.alloc(0))); // SETTINGS ack
      if (type === 0) this.data.set(stream, (this.data.get(stream) ?? 0) + len);
      if ((type === 0 || type === 1) && flags & 1) this.ended.add(stream);
      if (type === 3) this.reset.set(stream, payload.readUInt32BE(0));
      if (type === 7) this.goaway = true;
    }
  }
}

function rssMb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
}

describe('HTTP/2: a stream whose reader stops', () => {
  let upstream: Server;
  let gw: Standalone;
  let dir: string;
  let confDir: string;
  let open = 0;
  let aborted = 0;
  /** Downloads that reached the upstream. */
  let reached = 0;

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      if (req.url !== '/big') return res.end('small');
      open++;
      reached++;
      res.once('close', () => {
        open--;
        if (!res.writableFinished) aborted++;
      });
      const pump = (): void => {
        while (!res.destroyed) if (!res.write(CHUNK)) break;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
    dir = tempDir();
    writeFileSync(
      join(dir, 'api.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: dl}
spec:
  use_keyless: true
  proxy: {listen_path: /, target_url: '${url}'}
`,
    );
    confDir = tempDir('gw-conf-');
    const conf = join(confDir, 'gw.yaml');
    writeFileSync(conf, `http2: {max_concurrent_streams: 100, send_timeout: 3}\n`);
    gw = await startStandalone(dir, ['--config', conf]);
  }, 30_000);

  afterAll(async () => {
    const exited = gw?.proc.exitCode;
    await gw?.stop();
    upstream?.close();
    upstream?.closeAllConnections();
    if (dir) cleanup(dir);
    if (confDir) cleanup(confDir);
    expect(exited).toBeNull();
  });

  it('stuck streams hold one window each and are reset after send_timeout; the same connection and others are served meanwhile', async () => {
    const port = Number(new URL(gw.gateway).port);
    const rss0 = rssMb(gw.proc.pid!);
    const conns: RawConnection[] = [];
    const stuck: number[][] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      const c = new RawConnection(port);
      await c.open();
      stuck.push(Array.from({ length: STUCK }, () => c.request('/big')));
      conns.push(c);
    }
    const t0 = Date.now();
    let rssMax = 0;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, rssMb(gw.proc.pid!))), 100);
    const other = h2connect(gw.gateway);
    try {
      // while the downloads are stuck: small requests on the same connections and on another are answered
      await new Promise((r) => setTimeout(r, 300));
      let slowest = 0;
      for (let round = 0; round < 5; round++) {
        const small = conns.map((c) => c.request('/small'));
        const ts = Date.now();
        // the first round waits while 160 upstream sockets fill their kernel buffers: generous
        const end = Date.now() + 8000;
        while (conns.some((c, i) => !c.ended.has(small[i]!)) && Date.now() < end)
          await new Promise((r) => setTimeout(r, 20));
        slowest = Math.max(slowest, Date.now() - ts);
        conns.forEach((c, i) => expect([small[i], c.ended.has(small[i]!)]).toEqual([small[i], true]));
        expect((await h2get(other, '/small')).body).toBe('small');
        if (Date.now() - t0 > 2500) break;
        await new Promise((r) => setTimeout(r, 300));
      }
      // every download reached the upstream (a loaded machine opens the 160 upstream calls over a few seconds,
      // and send_timeout may already reset the first) and stopped at its stream window: 64 KiB each, no more
      const endReach = Date.now() + 10_000;
      while (reached < CONNECTIONS * STUCK && Date.now() < endReach) await new Promise((r) => setTimeout(r, 50));
      expect(reached).toBe(CONNECTIONS * STUCK);
      for (const [i, c] of conns.entries())
        for (const id of stuck[i]!) expect(c.data.get(id) ?? 0).toBeLessThanOrEqual(65_535);
      // after send_timeout (3 s) each stuck stream is reset (CANCEL, 8) and its upstream call aborted
      const end = Date.now() + 15_000;
      while ((open > 0 || conns.some((c, i) => stuck[i]!.some((id) => !c.reset.has(id)))) && Date.now() < end)
        await new Promise((r) => setTimeout(r, 100));
      const took = Date.now() - t0;
      expect(open).toBe(0);
      expect(aborted).toBe(CONNECTIONS * STUCK);
      for (const [i, c] of conns.entries()) for (const id of stuck[i]!) expect(c.reset.get(id)).toBe(8);
      expect(took).toBeGreaterThanOrEqual(2500);
      // the connections themselves stay open and usable
      for (const c of conns) expect(c.goaway).toBe(false);
      const after = conns.map((c) => c.request('/small'));
      const end2 = Date.now() + 3000;
      while (conns.some((c, i) => !c.ended.has(after[i]!)) && Date.now() < end2)
        await new Promise((r) => setTimeout(r, 20));
      conns.forEach((c, i) => expect(c.ended.has(after[i]!)).toBe(true));
      console.log(
        `h2 stuck streams: ${CONNECTIONS}×${STUCK} downloads stuck at their stream window, small requests on those connections answered within ${slowest} ms, stuck streams reset after ${took} ms, RSS ${rss0.toFixed(0)} → max ${rssMax.toFixed(0)} MB`,
      );
    } finally {
      clearInterval(sampler);
      other.close();
      for (const c of conns) c.socket.destroy();
    }
    // 160 stuck streams × (the 64 KiB window sent + a 64 KiB chunk queued + the 16 KiB write buffer) ≈ 23 MB
    expect(rssMax - rss0).toBeLessThan(64);
  }, 40_000);
});
