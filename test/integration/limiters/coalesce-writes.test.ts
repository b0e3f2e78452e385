/**
 * lib/store/redis.ts coalesceWrites on a real redis-server: commands issued in one event-loop turn stay
 * in the corked socket until the turn's setImmediate, then leave together and all get their replies;
 * a client with auto-pipelining off (the gateways' GATEWAY_STORE_OPTIONS) writes at once otherwise.
 */
import type { Redis } from 'ioredis';
import { coalesceWrites, createStoreClient, GATEWAY_STORE_OPTIONS } from '../../../lib/store/redis.js';
import { redisUrl } from '../../helpers/redis.js';

const client = createStoreClient(redisUrl(), { ...GATEWAY_STORE_OPTIONS, maxRetriesPerRequest: 1 }) as Redis;
beforeAll(() => client.ping());
afterAll(() => client.quit());

test('without coalescing, a command is written to the socket at once', async () => {
  const p = client.set('coalesce:a', '1');
  expect(client.stream.writableCorked).toBe(0);
  expect(client.stream.writableLength).toBe(0); // handed to the kernel, nothing held back
  await p;
});

test('commands of one turn leave together after the turn, and each gets its reply', async () => {
  coalesceWrites(client);
  const replies = Promise.all([client.set('coalesce:b', 'x'), client.incr('coalesce:n'), client.get('coalesce:b')]);
  coalesceWrites(client); // a second call in the same turn changes nothing
  expect(client.stream.writableCorked).toBe(1);
  expect(client.stream.writableLength).toBeGreaterThan(0); // held back: the three commands are waiting in the socket
  await new Promise((r) => setImmediate(r));
  expect(client.stream.writableCorked).toBe(0);
  expect(client.stream.writableLength).toBe(0);
  await expect(replies).resolves.toEqual(['OK', 1, 'x']);
});
