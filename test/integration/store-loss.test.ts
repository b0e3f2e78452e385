/**
 * The store-loss detector (lib/store/store-loss.ts) against a real redis-server of its own: a store emptied by
 * FLUSHALL is noticed by the background read, one restarted without persistence by the reconnect; every
 * subscriber is called once per loss (two processes that both notice agree on one new epoch, no ping-pong),
 * misses are held for the hold window only; the restorer markers say when a restorer has rewritten the store.
 */
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { StoreLossDetector } from '../../lib/store/store-loss.js';
import { RedisSessionStore } from '../../stores/sessions-redis.js';
import { SESSION_PREFIX } from '../../contract/sessions.js';
import { markerComplete, markerReady, markerRestoring, storeKeys, storeMarkerKey } from '../../contract/store-keys.js';
import { startNode, stopNode, type Node } from '../harness/redis-cluster.js';
import { eventually } from '../helpers/sidecar.js';

const logger = pino({ level: 'silent' });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const MARKER = storeMarkerKey('loss-ns');

/** A "gateway": its own connection and detector, with two subscribers counting their calls. */
function gateway(port: number, pollMs: number, holdMs = 1000) {
  const redis = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  const loss = new StoreLossDetector(redis, logger, {
    epochKey: storeKeys.storeEpoch,
    markers: { keys: [MARKER], complete: markerComplete },
    pollMs,
    holdMs,
  });
  const calls = [0, 0];
  /** Whether misses were held when the first subscriber was called. */
  const held: boolean[] = [];
  loss.subscribe(() => {
    calls[0]!++;
    held.push(loss.holding());
  });
  loss.subscribe(() => calls[1]!++);
  return {
    redis,
    loss,
    calls,
    held,
    close(): void {
      loss.stop();
      redis.disconnect();
    },
  };
}

describe('store-loss detector on a real redis-server', () => {
  let node: Node;
  let admin: Redis;
  const gateways: ReturnType<typeof gateway>[] = [];

  beforeAll(async () => {
    node = await startNode();
    admin = new Redis(`redis://127.0.0.1:${node.port}`);
    admin.on('error', () => undefined);
  });
  afterAll(async () => {
    for (const g of gateways) g.close();
    admin?.disconnect();
    if (node) await stopNode(node);
  });

  test('FLUSHALL: noticed by the background read of each process, every subscriber called once; misses held for the window', async () => {
    const a = gateway(node.port, 200);
    const b = gateway(node.port, 200);
    gateways.push(a, b);
    a.loss.start();
    b.loss.start();
    // a first read of a new store learns the id it sets: no loss
    await eventually(async () => (await admin.exists(storeKeys.storeEpoch)) === 1, 10_000, 'epoch set');
    expect(await a.loss.check()).toBe(false);
    expect(await b.loss.check()).toBe(false);
    expect([a.calls, b.calls]).toEqual([
      [0, 0],
      [0, 0],
    ]);
    expect(a.loss.holding()).toBe(false);

    await admin.flushall();
    await eventually(async () => a.calls[0] === 1 && b.calls[0] === 1, 10_000, 'both noticed the loss');
    expect([a.held, b.held]).toEqual([[true], [true]]);
    const t0 = Date.now();
    await a.loss.holdOver();
    expect(Date.now() - t0).toBeLessThan(3000); // the 1 s window, with slack for a loaded machine
    expect(a.loss.holding()).toBe(false);
    // many more reads: the two agreed on one new epoch, nobody notices a second loss
    await sleep(1500);
    expect([a.calls, b.calls]).toEqual([
      [1, 1],
      [1, 1],
    ]);
    expect(await a.loss.check()).toBe(false);

    // a loss read on demand (after a miss): concurrent reads share one, the subscribers are called once
    await admin.flushall();
    const reads = await Promise.all([a.loss.check(), a.loss.check(), a.loss.check()]);
    expect(reads).toEqual([true, true, true]);
    await sleep(600);
    expect(a.calls).toEqual([2, 2]);
    a.close();
    b.close();
  });

  test('a redis-server restarted without persistence: noticed on the reconnect (background read once a minute)', async () => {
    const g = gateway(node.port, 60_000);
    gateways.push(g);
    g.loss.start();
    expect(await g.loss.check()).toBe(false); // learns the epoch
    await admin.set('gw:some-record', 'x');
    admin.disconnect();
    await stopNode(node, true);
    node = await startNode([], node.port, node.dir);
    admin = new Redis(`redis://127.0.0.1:${node.port}`);
    admin.on('error', () => undefined);
    expect(await admin.exists('gw:some-record')).toBe(0); // the store came back empty
    await eventually(async () => g.calls[0] === 1, 20_000, 'the reconnect noticed the loss');
    expect(g.calls).toEqual([1, 1]);
    expect(g.held).toEqual([true]);
    await sleep(500);
    expect(g.calls).toEqual([1, 1]);
    g.close();
  });

  test('restorer markers: a miss is an answer until a marker was seen; then only while one says ready', async () => {
    const g = gateway(node.port, 60_000);
    gateways.push(g);
    await admin.del(MARKER);
    expect(await g.loss.restored()).toBe(true); // no restorer ever seen: a miss is an answer
    await admin.set(MARKER, markerRestoring('ctl'));
    expect(await g.loss.restored()).toBe(false);
    await admin.set(MARKER, markerReady('ctl'));
    expect(await g.loss.restored()).toBe(true);
    await admin.del(MARKER); // emptied, the restorer has not noticed yet
    expect(await g.loss.restored()).toBe(false);
    // one wait shared by every held lookup: true once the restorer says ready, false after its bound
    const waits = [g.loss.waitRestored(10_000), g.loss.waitRestored(10_000)];
    await sleep(300);
    await admin.set(MARKER, markerReady('ctl'));
    expect(await Promise.all(waits)).toEqual([true, true]);
    await admin.set(MARKER, markerRestoring('ctl'));
    const t0 = Date.now();
    expect(await g.loss.waitRestored(400)).toBe(false);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
    g.close();
  });

  test("a restore that finishes between a gateway's session read and its marker read: the key is not refused", async () => {
    const g = gateway(node.port, 60_000);
    gateways.push(g);
    const hash = 'f'.repeat(64);
    const stored = { namespace: 'default', session: { rate: 5, per: 1 } };
    await admin.set(MARKER, markerReady('ctl', 'first'));
    expect(await g.loss.restored()).toBe(true); // a marker seen: misses are checked against it from now on
    await admin.flushall(); // the store emptied; the gateway's lookup reads it before the controller restores
    const conn = new Redis(`redis://127.0.0.1:${node.port}`);
    const get = conn.get.bind(conn);
    let raced = false;
    // the controller's bulk restore (session, then marker ready with a new restore id) lands just after the read
    conn.get = (async (key: string) => {
      const v = await get(key);
      if (key === SESSION_PREFIX + hash && !raced) {
        raced = true;
        await admin.set(SESSION_PREFIX + hash, JSON.stringify(stored));
        await admin.set(MARKER, markerReady('ctl', 'second'));
      }
      return v;
    }) as typeof conn.get;
    const sessions = new RedisSessionStore(conn, logger, { loss: g.loss, holdMs: 2000 });
    try {
      expect((await sessions.get(hash))?.session.rate).toBe(5); // trusting the first read's miss answered 403
      expect(raced).toBe(true);
      // a key missing from a complete store is still a miss (not a 503)
      expect(await sessions.get('0'.repeat(64))).toBeUndefined();
    } finally {
      await sessions.close();
      conn.disconnect();
      g.close();
    }
  });
});
