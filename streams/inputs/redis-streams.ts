/**
 * redis_streams input: a consumer group on a Redis stream, at-least-once.
 *
 * - The group is created when missing (MKSTREAM; from the beginning with start_from_oldest, else "$").
 * - On start the consumer first re-reads its own pending entries (read but never acknowledged: the
 *   previous run of the same consumer crashed or was stopped mid-way), then reads new entries (">").
 * - An entry is acknowledged (XACK) only when the pipeline reports it delivered (or rejected for good);
 *   a failed or aborted entry stays pending. Entries pending for longer than claim_idle with any consumer
 *   (a dead one, or this one after giving up) are claimed with XAUTOCLAIM and delivered again. While an
 *   entry is in flight here its idle time is reset periodically (XCLAIM … JUSTID) so no other consumer
 *   claims it during long retries.
 * - Two connections: a blocking reader (disconnected to stop at once) and one for acks/claims.
 */
import { decodeBody } from '../body.js';
import type { Redis } from 'ioredis';
import { scrub, urlSecrets } from '../../lib/redact-url.js';
import { ioredis } from '../../lib/store/ioredis.js';
import type { RedisStreamsInputT } from '../../crds/schemas/streaming.js';
import { durationMs, sleep } from '../duration.js';
import type { Input, InputContext, Message, Outcome } from '../types.js';
const { hostname } = process.getBuiltinModule('node:os');

type Entry = [id: string, fields: string[] | null];

function asEntries(v: unknown): Entry[] {
  if (!Array.isArray(v)) return [];
  return v.filter((e): e is Entry => Array.isArray(e) && typeof e[0] === 'string');
}

/**
 * XREADGROUP reply for one stream: RESP2 [[stream, entries]], or the RESP3 map flattened to
 * [stream, entries] (ioredis 6 may return either); null when nothing came.
 */
function readReply(v: unknown): Entry[] {
  if (!Array.isArray(v) || v.length === 0) return [];
  const first: unknown = v[0];
  if (typeof first === 'string') return asEntries(v[1]);
  return Array.isArray(first) ? asEntries(first[1]) : [];
}

export class RedisStreamsInput implements Input {
  readonly type = 'redis_streams';
  readonly bufferSize: number;
  private readonly reader: Redis;
  private readonly writer: Redis;
  private readonly abort = new AbortController();
  private readonly inFlight = new Set<string>();
  private readonly consumer: string;
  private readonly claimIdleMs: number;
  /** Credentials of the Redis URL, kept out of the log lines of read failures. */
  private readonly secrets: string[];
  private loop: Promise<void> | undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private stopped = false;

  constructor(
    private readonly o: RedisStreamsInputT,
    private readonly ctx: InputContext,
    private readonly streamName: string,
    url: string,
  ) {
    this.bufferSize = Math.max(1, o.batch_size);
    this.consumer = o.consumer ?? hostname();
    this.claimIdleMs = durationMs(o.claim_idle);
    this.secrets = urlSecrets(url);
    const { Redis } = ioredis();
    this.reader = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: null,
      connectionName: `gw-stream-${streamName}-reader`,
    });
    this.writer = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 3,
      connectionName: `gw-stream-${streamName}`,
    });
    this.reader.on('error', () => undefined);
    this.writer.on('error', () => undefined);
  }

  /** Starts the read loop; connection problems are logged and retried by the loop, never thrown. */
  async start(): Promise<void> {
    if (this.loop) return;
    this.heartbeat = setInterval(() => void this.touch(), Math.max(100, Math.floor(this.claimIdleMs / 3)));
    this.loop = this.run();
  }

  private async connect(): Promise<void> {
    for (const c of [this.reader, this.writer]) {
      if (c.status === 'wait' || c.status === 'end') await c.connect();
    }
    await this.ensureGroup();
  }

  private async ensureGroup(): Promise<void> {
    try {
      await this.writer.call(
        'XGROUP',
        'CREATE',
        this.o.stream,
        this.o.group,
        this.o.start_from_oldest ? '0' : '$',
        'MKSTREAM',
      );
    } catch (e) {
      if (!String((e as Error).message).includes('BUSYGROUP')) throw e;
    }
  }

  private toMessage(id: string, fields: string[]): Message {
    const obj: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) obj[fields[i]!] = fields[i + 1]!;
    let body: unknown = obj;
    const raw = obj[this.o.body_key];
    if (raw !== undefined) body = decodeBody(raw);
    return { id, body, meta: { redis_stream: this.o.stream, redis_id: id } };
  }

  private ackFor(id: string) {
    return async (outcome: Outcome): Promise<void> => {
      try {
        if (outcome === 'delivered' || outcome === 'rejected') await this.writer.xack(this.o.stream, this.o.group, id);
      } finally {
        this.inFlight.delete(id);
      }
    };
  }

  private async deliver(entries: Entry[], signal: AbortSignal): Promise<void> {
    for (const [id, fields] of entries) {
      if (this.inFlight.has(id)) continue;
      if (fields === null) {
        // Deleted from the stream while pending: nothing left to deliver.
        await this.writer.xack(this.o.stream, this.o.group, id);
        continue;
      }
      this.inFlight.add(id);
      try {
        await this.ctx.push(this.toMessage(id, fields), this.ackFor(id), signal);
      } catch (e) {
        this.inFlight.delete(id); // stays pending: redelivered on the next start or claim
        throw e;
      }
    }
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    const g = this.o.group;
    const s = this.o.stream;
    const n = String(this.o.batch_size);
    let pendingCursor: string | undefined = '0';
    let nextClaim = 0;
    let connected = false;
    while (!signal.aborted) {
      try {
        if (!connected) {
          await this.connect();
          connected = true;
        }
        if (pendingCursor !== undefined) {
          // Our own entries left pending by a previous run.
          const entries = readReply(
            await this.reader.call('XREADGROUP', 'GROUP', g, this.consumer, 'COUNT', n, 'STREAMS', s, pendingCursor),
          );
          if (entries.length === 0) pendingCursor = undefined;
          else {
            pendingCursor = entries[entries.length - 1]![0];
            await this.deliver(entries, signal);
          }
          continue;
        }
        if (Date.now() >= nextClaim) {
          nextClaim = Date.now() + Math.max(100, Math.floor(this.claimIdleMs / 2));
          const reply = await this.writer.call(
            'XAUTOCLAIM',
            s,
            g,
            this.consumer,
            String(this.claimIdleMs),
            '0-0',
            'COUNT',
            n,
          );
          const claimed = Array.isArray(reply) ? asEntries(reply[1]) : [];
          if (claimed.length > 0) {
            await this.deliver(claimed, signal);
            continue;
          }
        }
        const block = String(Math.max(50, Math.min(1000, Math.floor(this.claimIdleMs / 2))));
        const entries = readReply(
          await this.reader.call(
            'XREADGROUP',
            'GROUP',
            g,
            this.consumer,
            'COUNT',
            n,
            'BLOCK',
            block,
            'STREAMS',
            s,
            '>',
          ),
        );
        await this.deliver(entries, signal);
      } catch (e) {
        if (signal.aborted || this.stopped) return;
        const msg = scrub((e as Error).message, this.secrets);
        if (msg.includes('NOGROUP')) await this.ensureGroup().catch(() => undefined);
        this.ctx.logger.warn({ stream: this.streamName, err: msg }, 'redis_streams read failed; retrying');
        await sleep(1000, signal).catch(() => undefined);
      }
    }
  }

  /** Resets the idle time of the entries in flight here, so other consumers do not claim them. */
  private async touch(): Promise<void> {
    if (this.inFlight.size === 0 || this.stopped) return;
    try {
      await this.writer.call('XCLAIM', this.o.stream, this.o.group, this.consumer, '0', ...this.inFlight, 'JUSTID');
    } catch {
      // best effort
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort(new Error('stopped'));
    this.reader.disconnect();
    await this.loop;
  }

  async close(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.reader.disconnect();
    if (this.writer.status === 'ready') await this.writer.quit().catch(() => this.writer.disconnect());
    else this.writer.disconnect();
  }
}
