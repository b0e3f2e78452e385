/**
 * HTTP/2 resource bounds per client (docs/proxy.md, "Slow clients and connection caps"), against the real
 * `gw standalone` on its plain listener (h2c):
 * - one address opening many connections, each with many streams held open by the upstream: past
 *   `http2.max_sessions_per_client` a connection gets GOAWAY ENHANCE_YOUR_CALM and is closed, past
 *   `http2.max_concurrent_streams` no more streams reach the upstream; another address is served;
 * - a client that sets its initial stream window to 0 and never sends WINDOW_UPDATE: its download is reset
 *   after `http2.send_timeout` and its upstream call aborted;
 * - rapid reset (HEADERS then RST_STREAM, CVE-2023-44487): the connection gets GOAWAY ENHANCE_YOUR_CALM
 *   after its reset budget, streams reset before their call began make no upstream call, RSS stays bounded.
 */
import { connect as h2connect, constants, type ClientHttp2Session } from 'node:http2';
import { readdirSync } from 'node:fs';
import {
  frame,
  h2get,
  hpackGet as get,
  RawConnection,
  rssMb,
  startProxiedGateway,
  u32,
  type ProxiedGateway,
} from '../../helpers/h2.js';
import type { Standalone } from '../../helpers/standalone.js';

const SESSIONS_CAP = 4;
const STREAMS_CAP = 10;
const CHUNK = Buffer.alloc(64 * 1024, 'x');

/** SETTINGS_INITIAL_WINDOW_SIZE (0x4) = n */
const initialWindow = (n: number): Buffer => Buffer.concat([Buffer.from([0, 4]), u32(n)]);

const fds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(50);
}

describe('HTTP/2 bounds per client', () => {
  let env: ProxiedGateway;
  let gw: Standalone;
  /** upstream requests open now, and in all; upstream connections accepted; downloads aborted */
  let open = 0;
  let calls = 0;
  let connections = 0;
  let abortedBig = 0;

  beforeAll(async () => {
    env = await startProxiedGateway((req, res) => {
      calls++;
      if (req.url === '/small') return res.end('small');
      open++;
      res.once('close', () => {
        open--;
        if (!res.writableFinished && req.url === '/big') abortedBig++;
      });
      if (req.url === '/hold') {
        // an answer begun and held open: a long poll, a stream between messages
        res.writeHead(200);
        res.write('x');
        return;
      }
      const pump = (): void => {
        while (!res.destroyed) if (!res.write(CHUNK)) break;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    }, `http2: {max_sessions_per_client: ${SESSIONS_CAP}, max_concurrent_streams: ${STREAMS_CAP}, send_timeout: 2}\n`);
    env.upstream.on('connection', () => connections++);
    gw = env.gw;
  }, 30_000);

  afterAll(async () => {
    const exited = await env?.stop();
    expect(exited).toBeNull();
  });

  it('rapid reset: GOAWAY ENHANCE_YOUR_CALM after the reset budget, no upstream call for a reset stream, RSS bounded', async () => {
    const pid = gw.proc.pid!;
    const port = Number(new URL(gw.gateway).port);
    const rss0 = rssMb(pid);
    const [calls0, connections0] = [calls, connections];
    // one pair (HEADERS, RST_STREAM CANCEL) per write, ten at a time, each ten after the gateway has read the
    // ones before (a PING answered): each read of the gateway sees a few streams opened and reset, as a client
    // over a real network makes them, even when the machine's load holds the gateway back (pairs sent on a
    // timer then reached it a thousand in one read, where nghttp2's own limit, INTERNAL_ERROR, acts first)
    const c = new RawConnection(port);
    const PAIRS = 1000;
    let sent = 0;
    try {
      await c.open();
      await sleep(200);
      for (; sent < PAIRS && !c.closed && c.goaway === undefined; sent++) {
        const id = 2 * sent + 1;
        c.socket.write(
          Buffer.concat([frame(1, 0x5, id, get('/hold')), frame(3, 0, id, u32(constants.NGHTTP2_CANCEL))]),
        );
        if (sent % 10 === 9) await c.ping();
      }
      await until(() => c.closed, 5000);
      // the budget: 2 × max_concurrent_streams resets, then GOAWAY ENHANCE_YOUR_CALM and the connection closed
      // (without it nghttp2's own limit: GOAWAY INTERNAL_ERROR after 1,000)
      expect(c.goaway).toBe(constants.NGHTTP2_ENHANCE_YOUR_CALM);
      expect(c.closed).toBe(true);
      const upstreamCalls = calls - calls0;
      const upstreamConnections = connections - connections0;
      // a stream reset before its upstream call began makes none; one begun is aborted (at most the budget)
      expect(upstreamConnections).toBeLessThanOrEqual(2 * STREAMS_CAP + 5);

      // then many connections at once, each pushing pairs in bulk (many per read), repeated
      let rssMax = 0;
      const sampler = setInterval(() => (rssMax = Math.max(rssMax, rssMb(pid))), 100);
      const bulk: Buffer = Buffer.concat(
        Array.from({ length: 5000 }, (_, i) =>
          Buffer.concat([
            frame(1, 0x5, 2 * i + 1, get('/hold')),
            frame(3, 0, 2 * i + 1, u32(constants.NGHTTP2_CANCEL)),
          ]),
        ),
      );
      const goaways: (number | undefined)[] = [];
      try {
        for (let wave = 0; wave < 5; wave++) {
          const conns = Array.from({ length: SESSIONS_CAP }, () => new RawConnection(port));
          await Promise.all(conns.map((k) => k.open()));
          for (const k of conns) k.socket.write(bulk);
          await until(() => conns.every((k) => k.closed), 10_000);
          for (const k of conns) goaways.push(k.goaway);
          for (const k of conns) k.socket.destroy();
        }
      } finally {
        clearInterval(sampler);
      }
      // every connection was closed with a GOAWAY (ENHANCE_YOUR_CALM, or nghttp2's INTERNAL_ERROR when the
      // whole burst came in one read), and the gateway still serves
      for (const g of goaways)
        expect([constants.NGHTTP2_ENHANCE_YOUR_CALM, constants.NGHTTP2_INTERNAL_ERROR]).toContain(g);
      const s = h2connect(gw.gateway);
      try {
        const { body } = await h2get(s, '/small');
        expect(body).toBe('small');
      } finally {
        s.close();
      }
      console.log(
        `h2 rapid reset: one connection closed (GOAWAY ${c.goaway}) after ${sent} resets, ${upstreamCalls} upstream calls and ${upstreamConnections} upstream connections made; 5 waves × ${SESSIONS_CAP} connections × 5,000 bulk resets: ${connections - connections0} upstream connections in all, RSS ${rss0.toFixed(0)} → max ${rssMax.toFixed(0)} MB`,
      );
      expect(rssMax - rss0).toBeLessThan(160);
    } finally {
      c.socket.destroy();
    }
  }, 60_000);
  it('streams closed before they are served (reset with any code, refused past the budget) leave the gateway up', async () => {
    // one write: pairs of HEADERS and RST_STREAM with error codes other than CANCEL (each closed stream
    // emits an error), past the reset budget, so the streams after it are refused (REFUSED_STREAM)
    const codes = [constants.NGHTTP2_PROTOCOL_ERROR, constants.NGHTTP2_INTERNAL_ERROR, constants.NGHTTP2_STREAM_CLOSED];
    const port = Number(new URL(gw.gateway).port);
    for (let round = 0; round < 3; round++) {
      const c = new RawConnection(port);
      await c.open();
      c.socket.write(
        Buffer.concat(
          Array.from({ length: 300 }, (_, i) =>
            Buffer.concat([frame(1, 0x5, 2 * i + 1, get('/hold')), frame(3, 0, 2 * i + 1, u32(codes[i % 3]!))]),
          ),
        ),
      );
      await until(() => c.closed, 5000);
      c.socket.destroy();
      expect(c.goaway).toBeDefined();
    }
    await sleep(200); // the errors of the closed streams are emitted on the ticks after
    expect(gw.proc.exitCode).toBeNull();
    const s = h2connect(gw.gateway);
    try {
      expect((await h2get(s, '/small')).body).toBe('small');
    } finally {
      s.close();
    }
  });

  it('one address: sessions past the cap get GOAWAY ENHANCE_YOUR_CALM, no more than the stream cap per session reach the upstream; another address is served', async () => {
    const pid = gw.proc.pid!;
    const [fds0, rss0] = [fds(pid), rssMb(pid)];
    const sessions: ClientHttp2Session[] = [];
    const goaways: number[] = [];
    let answered = 0;
    try {
      // 3× the session cap from 127.0.0.1, each asking for 2× the stream cap of held answers
      for (let i = 0; i < 3 * SESSIONS_CAP; i++) {
        const s = h2connect(gw.gateway);
        s.on('error', () => undefined);
        s.on('goaway', (code: number) => goaways.push(code));
        sessions.push(s);
        await new Promise<void>((r) => {
          s.once('remoteSettings', () => r());
          s.once('close', () => r());
        });
        if (s.destroyed) continue;
        for (let j = 0; j < 2 * STREAMS_CAP; j++) {
          const r = s.request({ ':path': '/hold' });
          r.on('response', () => answered++);
          r.on('error', () => undefined);
        }
      }
      await until(() => open >= SESSIONS_CAP * STREAMS_CAP && answered >= SESSIONS_CAP * STREAMS_CAP, 10_000);
      await sleep(500);
      const [fdsHeld, rssHeld] = [fds(pid), rssMb(pid)];
      // at most the cap of sessions × the cap of streams reach the upstream (unbounded: 12 × 20 = 240)
      expect(open).toBe(SESSIONS_CAP * STREAMS_CAP);
      expect(answered).toBe(SESSIONS_CAP * STREAMS_CAP);
      // the sessions past the cap were told why (GOAWAY ENHANCE_YOUR_CALM) and closed
      expect(goaways.length).toBe(2 * SESSIONS_CAP);
      for (const code of goaways) expect(code).toBe(constants.NGHTTP2_ENHANCE_YOUR_CALM);
      expect(sessions.filter((s) => !s.destroyed && !s.closed).length).toBe(SESSIONS_CAP);
      // another address is served meanwhile
      const other = h2connect(gw.gateway, { localAddress: '127.0.0.2' } as Parameters<typeof h2connect>[1]);
      try {
        const { body } = await h2get(other, '/small');
        expect(body).toBe('small');
      } finally {
        other.close();
      }
      console.log(
        `h2 per address: ${3 * SESSIONS_CAP} sessions × ${2 * STREAMS_CAP} streams asked from one address, ${open} upstream calls held, ${goaways.length} sessions refused (GOAWAY ${goaways[0]}); gateway fds ${fds0} → ${fdsHeld}, RSS ${rss0.toFixed(0)} → ${rssHeld.toFixed(0)} MB`,
      );
    } finally {
      for (const s of sessions) s.destroy();
    }
    await until(() => open === 0, 5000);
    expect(open).toBe(0);
  }, 30_000);

  it('a client that never opens its stream window: the download is reset after send_timeout, its upstream call aborted', async () => {
    const pid = gw.proc.pid!;
    const rss0 = rssMb(pid);
    const aborted0 = abortedBig;
    const c = new RawConnection(Number(new URL(gw.gateway).port));
    try {
      await c.open(initialWindow(0)); // every stream's window 0; no WINDOW_UPDATE ever; the socket read
      const t0 = Date.now();
      for (let i = 0; i < STREAMS_CAP; i++) c.socket.write(frame(1, 0x5, 2 * i + 1, get('/big')));
      let rssMax = 0;
      const end = Date.now() + 15_000;
      while (c.reset.size < STREAMS_CAP && Date.now() < end) {
        rssMax = Math.max(rssMax, rssMb(pid));
        await sleep(100);
      }
      const took = Date.now() - t0;
      // every download reset with CANCEL after send_timeout (2 s), none of its data sent (window 0)
      expect(c.reset.size).toBe(STREAMS_CAP);
      for (const code of c.reset.values()) expect(code).toBe(constants.NGHTTP2_CANCEL);
      expect(c.data.size).toBe(0);
      expect(took).toBeGreaterThanOrEqual(1500);
      expect(took).toBeLessThan(8000);
      await until(() => abortedBig - aborted0 >= STREAMS_CAP, 5000);
      expect(abortedBig - aborted0).toBe(STREAMS_CAP);
      expect(c.goaway).toBeUndefined();
      console.log(
        `h2 window 0: ${STREAMS_CAP} downloads reset after ${took} ms (send_timeout 2 s), upstream calls aborted, RSS ${rss0.toFixed(0)} → max ${rssMax.toFixed(0)} MB`,
      );
      // each stream held one upstream chunk and its write buffer: well under a few MB
      expect(rssMax - rss0).toBeLessThan(32);
    } finally {
      c.socket.destroy();
    }
  }, 30_000);
});
