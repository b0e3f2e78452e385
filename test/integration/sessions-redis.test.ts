import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { RedisSessionStore, SESSION_PREFIX } from '../../contract/sessions-redis.js';
import { freshRedis } from '../helpers/redis.js';

const logger = pino({ level: 'silent' });

describe('sessions in real Redis', () => {
  let writerConn: Redis;
  let readerConn: Redis;
  let writer: RedisSessionStore;
  let reader: RedisSessionStore;

  beforeAll(async () => {
    writerConn = await freshRedis();
    readerConn = writerConn.duplicate();
    writer = new RedisSessionStore(writerConn, logger);
    reader = new RedisSessionStore(readerConn, logger, 60_000); // long cache: only the notification can refresh it
    await reader.subscribe();
  });
  afterAll(async () => {
    await reader.close();
    writerConn.disconnect();
    readerConn.disconnect();
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
