/**
 * One HTTP/2 stream whose reader stops (docs/proxy.md, "Slow clients and connection caps"), against the real
 * `gw standalone` on its plain listener (h2c). The client keeps reading its socket and grants the
 * connection a large window, but never grants window to its download streams: each such stream's answer
 * stops after its 64 KiB stream window while the connection stays open. The gateway must hold a bounded
 * amount per stuck stream (the upstream is paused), keep serving the other streams of the same connection
 * and other clients, and reset each stuck stream after `http2.send_timeout`, aborting its upstream call.
 */
import { connect as h2connect } from 'node:http2';
import {
  h2get,
  RawConnection,
  rssMb,
  startProxiedGateway,
  windowUpdate,
  type ProxiedGateway,
} from '../../helpers/h2.js';
import type { Standalone } from '../../helpers/standalone.js';

const STUCK = 40;
const CONNECTIONS = 4;
const CHUNK = Buffer.alloc(64 * 1024, 'x');

describe('HTTP/2: a stream whose reader stops', () => {
  let env: ProxiedGateway;
  let gw: Standalone;
  let open = 0;
  let aborted = 0;
  /** Downloads that reached the upstream. */
  let reached = 0;

  beforeAll(async () => {
    env = await startProxiedGateway((req, res) => {
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
    }, `http2: {max_concurrent_streams: 100, send_timeout: 3}\n`);
    gw = env.gw;
  }, 30_000);

  afterAll(async () => {
    const exited = await env?.stop();
    expect(exited).toBeNull();
  });

  it('stuck streams hold one window each and are reset after send_timeout; the same connection and others are served meanwhile', async () => {
    const port = Number(new URL(gw.gateway).port);
    const rss0 = rssMb(gw.proc.pid!);
    const conns: RawConnection[] = [];
    const stuck: number[][] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      const c = new RawConnection(port);
      // the connection's window raised to 1 GiB: only the streams' own windows (64 KiB) hold the answers
      await c.open(Buffer.alloc(0), [windowUpdate(0, 1 << 30)]);
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
      for (const c of conns) expect(c.goaway).toBeUndefined();
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
