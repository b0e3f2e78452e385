/**
 * HTTP/2 clients that do not read (docs/proxy.md, "Slow clients and connection caps"), against the real
 * `gw standalone` on its plain listener (h2c). A hostile client opens 10× the stream cap on each of a few
 * connections, each a never-ending download, and never reads: it writes its frames on a raw socket and
 * pauses it, so the TCP window closes (node:http2's client reads its socket whatever a stream's pause says).
 * The gateway lets no more than `http2.max_concurrent_streams` per connection reach the upstream, holds a
 * chunk or two per open stream (the upstream is paused), and resets a stream whose answer could not move
 * for `http2.send_timeout`, aborting its upstream call; RSS stays within a stated bound and a node:http2
 * client is served throughout.
 */
import { connect as h2connect } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { frame, h2get, hpackGet, PREFACE, rssMb, startProxiedGateway, type ProxiedGateway } from '../../helpers/h2.js';
import type { Standalone } from '../../helpers/standalone.js';

const STREAMS_CAP = 20;
const CONNECTIONS = 8;
/** streams the hostile client asks for on each connection: 10× the cap */
const ASKED = 200;
const CHUNK = Buffer.alloc(64 * 1024, 'x');
const GET_BIG = hpackGet('/big');

describe('HTTP/2 clients that never read', () => {
  let env: ProxiedGateway;
  let gw: Standalone;
  /** downloads the upstream has open now, the most at once, and bytes it has written in all */
  let open = 0;
  let maxOpen = 0;
  let written = 0;

  beforeAll(async () => {
    // an endless download, written with backpressure: the upstream is paused when the gateway is
    env = await startProxiedGateway((req, res) => {
      if (req.url !== '/big') return res.end('small');
      maxOpen = Math.max(maxOpen, ++open);
      res.once('close', () => open--);
      const pump = (): void => {
        while (!res.destroyed) {
          written += CHUNK.length;
          if (!res.write(CHUNK)) break;
        }
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    }, `http2: {max_concurrent_streams: ${STREAMS_CAP}, send_timeout: 3}\n`);
    gw = env.gw;
  }, 30_000);

  afterAll(async () => {
    const exited = await env?.stop();
    expect(exited).toBeNull();
  });

  it('streams past the cap are refused, RSS stays bounded, others are served, stalled streams are reset', async () => {
    const port = Number(new URL(gw.gateway).port);
    const rss0 = rssMb(gw.proc.pid!);
    const hostile: Socket[] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      const socket = netConnect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((r) => socket.once('connect', r));
      const frames = [PREFACE, frame(4, 0, 0, Buffer.alloc(0))]; // the preface, an empty SETTINGS
      for (let s = 0; s < ASKED; s++) frame(1, 0x5, 2 * s + 1, GET_BIG, frames); // HEADERS, END_STREAM|END_HEADERS
      socket.write(Buffer.concat(frames));
      socket.pause(); // nothing the gateway sends is read: the TCP window closes
      hostile.push(socket);
    }
    // let the answers start and fill the sockets
    await new Promise((r) => setTimeout(r, 500));

    // while held: RSS sampled, another client served
    let rssMax = 0;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, rssMb(gw.proc.pid!))), 100);
    const other = h2connect(gw.gateway);
    try {
      for (let i = 0; i < 5; i++) {
        const r = await h2get(other, '/small');
        expect(r.headers[':status']).toBe(200);
        expect(r.body).toBe('small');
        await new Promise((res) => setTimeout(res, 200));
      }
      // no more than the cap of streams per connection reached the upstream (unbounded: all 1,600)
      expect(maxOpen).toBeGreaterThan(0);
      expect(maxOpen).toBeLessThanOrEqual(CONNECTIONS * STREAMS_CAP);
      // after send_timeout (3 s) the streams whose answers cannot move are reset and their upstream calls
      // aborted: none is left open at the upstream
      const end = Date.now() + 20_000;
      while (open > 0 && Date.now() < end) await new Promise((res) => setTimeout(res, 200));
      expect(open).toBe(0);
      const r = await h2get(other, '/small');
      expect(r.headers[':status']).toBe(200);
    } finally {
      clearInterval(sampler);
      other.close();
      for (const h of hostile) h.destroy();
    }
    const grew = rssMax - rss0;
    console.log(
      `h2 hostile: ${CONNECTIONS}×${ASKED} streams asked, at most ${maxOpen} upstream calls at once, upstream bytes ${(written / 1e6).toFixed(1)} MB, RSS ${rss0.toFixed(0)} → max ${rssMax.toFixed(0)} MB`,
    );
    // the bound: 160 streams × (a 64 KiB chunk queued + the 16 KiB write buffer) ≈ 13 MB held, plus the
    // chunks that passed until the collector returns them; 64 MB stated. (The upstream's byte count is no
    // measure of the gateway: loopback sockets buffer megabytes each in the kernel, outside its RSS.)
    expect(grew).toBeLessThan(64);
  }, 60_000);
});
