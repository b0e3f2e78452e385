import { Redis } from 'ioredis';
import { startRedis } from '../harness/redis.js';
import { pino } from 'pino';
import { RedisSessionStore } from '../../stores/sessions-redis.js';
import { SESSION_PREFIX } from '../../contract/sessions.js';
import { suiteRedisCluster } from '../helpers/redis.js';

const logger = pino({ level: 'silent' });

async function eventually(ok: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('sessions in real Redis', () => {
  let server: Awaited<ReturnType<typeof startRedis>>;
  let writerConn: Redis;
  let readerConn: Redis;
  let writer: RedisSessionStore;
  let reader: RedisSessionStore;

  beforeAll(async () => {
    // a redis-server of its own: nothing another suite does to the shared one reaches this pub/sub pair
    server = await startRedis();
    writerConn = new Redis(server.url, { maxRetriesPerRequest: 1 });
    readerConn = writerConn.duplicate();
    writer = new RedisSessionStore(writerConn, logger);
    reader = new RedisSessionStore(readerConn, logger, 60_000); // long cache: only the notification can refresh it
    await reader.subscribe();
  });
  afterAll(async () => {
    await reader?.close();
    writerConn?.disconnect();
    readerConn?.disconnect();
    await server?.stop();
  });

  test('a change reaches a cached reader through the notification', async () => {
    const hash = 'a'.repeat(64);
    await writer.put(hash, { namespace: 'default', session: { rate: 1, per: 1 } });
    expect((await reader.get(hash))?.session.rate).toBe(1);
    const seen = new Promise<string>((r) => reader.onChange(r));
    await writer.put(hash, { namespace: 'default', session: { rate: 7, per: 1 } });
    expect(await seen).toBe(hash);
    expect((await reader.get(hash))?.session.rate).toBe(7);
    expect(await writer.list()).toEqual([hash]);
    expect(await writer.delete(hash)).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(await reader.get(hash)).toBeUndefined();
  });

  test('corrupt Redis contents are refused, not crashed on', async () => {
    await writerConn.set(SESSION_PREFIX + 'b'.repeat(64), '{"namespace":"default","session":{"rate":"lots"}}');
    await writerConn.set(SESSION_PREFIX + 'c'.repeat(64), 'not json');
    expect(await writer.get('b'.repeat(64))).toBeUndefined();
    expect(await writer.get('c'.repeat(64))).toBeUndefined();
    // a key of the wrong Redis type: an unknown key too (no WRONGTYPE error up to the request)
    await writerConn.hset(SESSION_PREFIX + 'd'.repeat(64), 'a', 'b');
    expect(await writer.get('d'.repeat(64))).toBeUndefined();
  });
});

describe('session puts written together', () => {
  test('puts of one turn go out as one MSET and one PUBLISH naming every hash; each cached reader entry drops', async () => {
    const hashes = Array.from({ length: 1500 }, (_, i) => 'e' + i.toString(16).padStart(63, '0'));
    // a redis-server of its own: its command counts are server-wide
    const server = await startRedis();
    const conn = new Redis(server.url);
    const own = new RedisSessionStore(conn, logger);
    const readerConn = conn.duplicate();
    const reader = new RedisSessionStore(readerConn, logger, 60_000);
    await reader.subscribe();
    try {
      await Promise.all(hashes.map((h) => own.put(h, { namespace: 'default', session: { rate: 1, per: 1 } })));
      for (const h of hashes.slice(0, 3)) expect((await reader.get(h))?.session.rate).toBe(1);
      const stats = async (): Promise<Record<string, number>> => {
        const out: Record<string, number> = {};
        for (const m of (await conn.info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+)/gm))
          out[m[1]!] = Number(m[2]);
        return out;
      };
      await conn.config('RESETSTAT');
      const seen = new Set<string>();
      reader.onChange((h) => seen.add(h));
      await Promise.all(hashes.map((h) => own.put(h, { namespace: 'default', session: { rate: 9, per: 1 } })));
      const s = await stats();
      expect(s.mset).toBe(2); // 1,500 sessions: batches of at most 1,000
      expect(s.publish).toBe(2);
      expect(s.set ?? 0).toBe(0);
      await eventually(() => seen.size === hashes.length);
      for (const h of hashes.slice(0, 3)) expect((await reader.get(h))?.session.rate).toBe(9);
      expect(JSON.parse((await conn.get(SESSION_PREFIX + hashes[1499]!))!).session.rate).toBe(9);
    } finally {
      await reader.close();
      readerConn.disconnect();
      conn.disconnect();
      await server.stop();
    }
  });
});

describe('sessions on a Redis Cluster', () => {
  const cluster = suiteRedisCluster();

  test('puts of one turn land in their own hash slots (no CROSSSLOT) and reach a subscribed reader', async () => {
    const writer = new RedisSessionStore(cluster(), logger);
    const reader = new RedisSessionStore(cluster(), logger, 60_000);
    await reader.subscribe();
    try {
      const hashes = Array.from({ length: 200 }, (_, i) => 'f' + i.toString(16).padStart(63, '0'));
      await Promise.all(hashes.map((h) => writer.put(h, { namespace: 'default', session: { rate: 1, per: 1 } })));
      expect((await reader.get(hashes[0]!))?.session.rate).toBe(1);
      const seen = new Set<string>();
      reader.onChange((h) => seen.add(h));
      await Promise.all(hashes.map((h) => writer.put(h, { namespace: 'default', session: { rate: 4, per: 1 } })));
      await eventually(() => seen.size === hashes.length);
      expect((await reader.get(hashes[0]!))?.session.rate).toBe(4);
      expect((await writer.list()).sort()).toEqual(hashes);
    } finally {
      await reader.close();
    }
  });
});
