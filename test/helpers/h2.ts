/** HTTP/2 pieces for the tests: raw frames on loopback sockets, a node:http2 GET, the gateway's RSS. */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { ClientHttp2Session, IncomingHttpHeaders } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiManifest, cleanup, startStandalone, tempDir, type Standalone } from './standalone.js';

/** The HTTP/2 client connection preface (RFC 9113 §3.4). */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/** One frame (RFC 9113 §4.1), also appended to `out` when given. */
export function frame(type: number, flags: number, stream: number, payload: Buffer, out?: Buffer[]): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  const f = Buffer.concat([h, payload]);
  out?.push(f);
  return f;
}

/**
 * HPACK (RFC 7541): :method GET, :scheme http (static 2, 6), :path `path` and :authority gw (literal, indexed
 * names), then `extra` name/value pairs (literals without indexing, new names; each under 127 bytes).
 */
export const hpackGet = (path: string, extra: [string, string][] = []): Buffer =>
  Buffer.concat([
    Buffer.from([0x82, 0x86, 0x04, path.length]),
    Buffer.from(path),
    Buffer.from([0x01, 2]),
    Buffer.from('gw'),
    ...extra.flatMap(([k, v]) => [
      Buffer.from([0x00, k.length]),
      Buffer.from(k),
      Buffer.from([v.length]),
      Buffer.from(v),
    ]),
  ]);

/** How an HPACK header block (RFC 7541 §6) represents one field, and the table index it names (0: a literal name). */
export interface HpackField {
  kind: 'indexed' | 'incremental' | 'without' | 'never' | 'table-size';
  index: number;
}

/** The representations of an HPACK header block, in order: what each field asks of the decoder's tables. */
export function hpackFields(block: Buffer): HpackField[] {
  let at = 0;
  // an integer of an N-bit prefix (§5.1)
  const int = (bits: number): number => {
    const max = (1 << bits) - 1;
    let i = block[at++]! & max;
    if (i < max) return i;
    for (let m = 0; ; m += 7) {
      const b = block[at++]!;
      i += (b & 127) * 2 ** m;
      if ((b & 128) === 0) return i;
    }
  };
  const skipString = (): void => {
    const len = int(7);
    at += len;
  };
  const out: HpackField[] = [];
  while (at < block.length) {
    const b = block[at]!;
    if (b & 0x80) out.push({ kind: 'indexed', index: int(7) });
    else if (b & 0x40 || (b & 0xe0) !== 0x20) {
      const [kind, bits] =
        b & 0x40 ? (['incremental', 6] as const) : b & 0x10 ? (['never', 4] as const) : (['without', 4] as const);
      const index = int(bits);
      if (index === 0) skipString();
      skipString();
      out.push({ kind, index });
    } else out.push({ kind: 'table-size', index: int(5) });
  }
  return out;
}

/** `n` as 4 bytes, big-endian. */
export const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
};

/** A WINDOW_UPDATE frame granting `n` bytes to `stream` (0: the connection). */
export const windowUpdate = (stream: number, n: number): Buffer => frame(8, 0, stream, u32(n));

/** One request for `path` over `session` with `headers` (and `body`, if given): its response headers and body. */
export function h2get(
  session: ClientHttp2Session,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<{ headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const r = session.request({ ':path': path, ':method': method, ...headers }, { endStream: body === undefined });
    let got = '';
    let h: IncomingHttpHeaders = {};
    r.on('response', (x) => (h = x));
    r.on('data', (c: Buffer) => (got += c.toString()));
    r.on('end', () => resolve({ headers: h, body: got }));
    r.on('error', reject);
    if (body !== undefined) r.end(body);
  });
}

/** The resident set size of process `pid`, in MB. */
export function rssMb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
}

/**
 * A raw client connection to 127.0.0.1:`port`, its frames parsed as they come: per stream the DATA bytes,
 * END_STREAM and the RST_STREAM code; the first GOAWAY's code; whether the socket closed.
 */
export class RawConnection {
  readonly data = new Map<number, number>();
  readonly ended = new Set<number>();
  readonly reset = new Map<number, number>();
  /** Per stream, the header block of its first HEADERS frame (padding and priority removed). */
  readonly heads = new Map<number, Buffer>();
  goaway: number | undefined;
  closed = false;
  /** PING acks received */
  pings = 0;
  private buf = Buffer.alloc(0);
  private next = 1;
  readonly socket: Socket;
  constructor(port: number) {
    this.socket = netConnect(port, '127.0.0.1');
    this.socket.on('error', () => undefined);
    this.socket.on('data', (d: Buffer) => this.read(d));
    this.socket.on('close', () => (this.closed = true));
  }
  /** Connects and sends the preface, a SETTINGS frame of `settings`, then the frames `after`. */
  async open(settings: Buffer = Buffer.alloc(0), after: Buffer[] = []): Promise<void> {
    await new Promise((r) => this.socket.once('connect', r));
    this.socket.write(Buffer.concat([PREFACE, frame(4, 0, 0, settings), ...after]));
  }
  /** Opens the next client stream with a GET for `path` (END_STREAM|END_HEADERS), `extra` headers too; returns its id. */
  request(path: string, extra: [string, string][] = []): number {
    const id = this.next;
    this.next += 2;
    this.socket.write(frame(1, 0x5, id, hpackGet(path, extra)));
    return id;
  }
  /**
   * Sends a PING and resolves when its ack comes (or the connection ends, or after `ms`): the gateway has
   * read everything sent before it, so what is sent next arrives in a read of its own.
   */
  async ping(ms = 5000): Promise<void> {
    const acks = this.pings;
    this.socket.write(frame(6, 0, 0, Buffer.alloc(8)));
    const until = performance.now() + ms;
    while (this.pings === acks && !this.closed && this.goaway === undefined && performance.now() < until)
      await new Promise((r) => setTimeout(r, 1));
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
      if (type === 4 && !(flags & 1) && this.socket.writable) this.socket.write(frame(4, 1, 0, Buffer.alloc(0))); // SETTINGS ack
      if (type === 0) this.data.set(stream, (this.data.get(stream) ?? 0) + len);
      if (type === 1 && !this.heads.has(stream)) {
        const pad = flags & 0x8 ? payload[0]! : 0;
        const from = (flags & 0x8 ? 1 : 0) + (flags & 0x20 ? 5 : 0);
        this.heads.set(stream, Buffer.from(payload.subarray(from, payload.length - pad)));
      }
      if ((type === 0 || type === 1) && flags & 1) this.ended.add(stream);
      if (type === 3) this.reset.set(stream, payload.readUInt32BE(0));
      if (type === 7) this.goaway ??= payload.readUInt32BE(4);
      if (type === 6 && flags & 1) this.pings++;
    }
  }
}

export interface ProxiedGateway {
  gw: Standalone;
  upstream: Server;
  /** Stops the gateway, closes the upstream, removes the files; resolves with the exit code the gateway had before (null: running). */
  stop(): Promise<number | null>;
}

/**
 * An upstream serving `handler` on loopback and a `gw standalone` proxying every path to it (a keyless API
 * `dl`), with `config` as its --config file.
 */
export async function startProxiedGateway(handler: RequestListener, config: string): Promise<ProxiedGateway> {
  const upstream = createServer(handler);
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  const dir = tempDir();
  const confDir = tempDir('gw-conf-');
  const remove = (): void => {
    upstream.close();
    upstream.closeAllConnections();
    cleanup(dir);
    cleanup(confDir);
  };
  writeFileSync(
    join(dir, 'api.yaml'),
    apiManifest('dl', `use_keyless: true\nproxy: {listen_path: /, target_url: '${url}'}`),
  );
  const conf = join(confDir, 'gw.yaml');
  writeFileSync(conf, config);
  let gw: Standalone;
  try {
    gw = await startStandalone(dir, ['--config', conf]);
  } catch (e) {
    remove();
    throw e;
  }
  return {
    gw,
    upstream,
    stop: async () => {
      const exited = gw.proc.exitCode;
      await gw.stop();
      remove();
      return exited;
    },
  };
}
