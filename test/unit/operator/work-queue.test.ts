import { backoffDelay } from '../../../lib/backoff.js';
import { WorkQueue } from '../../../controller/work-queue.js';
import { FakeTimers, flush } from './fake-timers.js';

/** A handler whose runs the test completes by hand. */
function gatedHandler() {
  const runs: { key: string; done: (err?: Error) => void }[] = [];
  const handler = (key: string) =>
    new Promise<void>((resolve, reject) => {
      runs.push({ key, done: (err) => (err ? reject(err) : resolve()) });
    });
  return { runs, handler };
}

describe('operator work queue', () => {
  test('a key added several times while waiting runs once', async () => {
    const timers = new FakeTimers();
    const seen: string[] = [];
    const q = new WorkQueue({ handler: async (k) => void seen.push(k), concurrency: 1, timers });
    q.add('a');
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.depth()).toBe(3 - 1); // nothing runs before start: a, b
    q.start();
    await q.idle();
    expect(seen).toEqual(['a', 'b']);
  });

  test('one key never runs twice at once; an add during a run runs it again afterwards', async () => {
    const timers = new FakeTimers();
    const g = gatedHandler();
    const q = new WorkQueue({ handler: g.handler, concurrency: 4, timers });
    q.start();
    q.add('k');
    await flush();
    expect(g.runs.map((r) => r.key)).toEqual(['k']);
    q.add('k');
    q.add('k');
    await flush();
    expect(g.runs).toHaveLength(1); // still running: not started a second time
    g.runs[0]!.done();
    await flush();
    expect(g.runs).toHaveLength(2); // exactly one more run
    g.runs[1]!.done();
    await q.idle();
    expect(g.runs).toHaveLength(2);
  });

  test('concurrency is bounded', async () => {
    const timers = new FakeTimers();
    const g = gatedHandler();
    const q = new WorkQueue({ handler: g.handler, concurrency: 3, timers });
    q.start();
    for (let i = 0; i < 10; i++) q.add(`k${i}`);
    await flush();
    expect(g.runs).toHaveLength(3);
    expect(q.depth()).toBe(7);
    g.runs[0]!.done();
    await flush();
    expect(g.runs).toHaveLength(4);
  });

  test('failures retry with exponential backoff, capped; success forgets the failures', async () => {
    const timers = new FakeTimers();
    const at: number[] = [];
    let failUntil = 5;
    const q = new WorkQueue({
      handler: async () => {
        at.push(timers.now());
        if (at.length <= failUntil) throw new Error('boom');
      },
      concurrency: 1,
      baseDelayMs: 100,
      maxDelayMs: 1000,
      timers,
    });
    q.start();
    q.add('x');
    await timers.advance(10_000);
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    expect(gaps).toEqual([100, 200, 400, 800, 1000]);
    expect(q.attempts('x')).toBe(0);
    // after the success, a new failure starts again at the base delay
    failUntil = at.length + 1;
    q.add('x');
    await timers.advance(5000);
    const last = at.slice(-2);
    expect(last[1]! - last[0]!).toBe(100);
  });

  test('backoffDelay doubles from the base up to the cap', () => {
    expect([1, 2, 3, 4, 10, 100].map((n) => backoffDelay(n, 50, 1000))).toEqual([50, 100, 200, 400, 1000, 1000]);
  });

  test('addAfter: an earlier pending delayed add wins; add() is immediate', async () => {
    const timers = new FakeTimers();
    const seen: [string, number][] = [];
    const q = new WorkQueue({ handler: async (k) => void seen.push([k, timers.now()]), timers });
    q.start();
    const t0 = timers.now();
    q.addAfter('c', 1000);
    q.addAfter('c', 5000); // later: ignored
    q.addAfter('c', 500); // earlier: replaces
    await timers.advance(2000);
    expect(seen).toEqual([['c', t0 + 500]]);
    expect(timers.pendingCount()).toBe(0);
  });

  test('stop() holds keys, clear() forgets them, start() resumes', async () => {
    const timers = new FakeTimers();
    const seen: string[] = [];
    const q = new WorkQueue({ handler: async (k) => void seen.push(k), timers });
    q.add('a');
    q.addAfter('b', 100);
    q.clear();
    await timers.advance(200);
    q.add('c');
    q.start();
    await q.idle();
    expect(seen).toEqual(['c']);
  });
});

describe('operator work queue: shutdown', () => {
  test('idle() after stop() waits for running keys only, not for queued ones', async () => {
    const timers = new FakeTimers();
    const g = gatedHandler();
    const q = new WorkQueue({ handler: g.handler, concurrency: 1, timers });
    q.start();
    q.add('a');
    q.add('b');
    await flush();
    q.stop();
    let idle = false;
    void q.idle().then(() => (idle = true));
    await flush();
    expect(idle).toBe(false); // 'a' still runs
    g.runs[0]!.done();
    await flush();
    expect(idle).toBe(true);
    expect(g.runs).toHaveLength(1); // 'b' stays queued
    expect(q.depth()).toBe(1);
  });
});

describe('operator work queue: live before bulk', () => {
  test('a live key runs before every waiting bulk key; a waiting bulk key added live is promoted, and runs once', async () => {
    const timers = new FakeTimers();
    const seen: string[] = [];
    const q = new WorkQueue({ handler: async (k) => void seen.push(k), concurrency: 1, timers });
    for (let i = 0; i < 1000; i++) q.add(`bulk-${i}`, 'bulk');
    q.add('live-a');
    q.add('bulk-500'); // promoted
    q.add('bulk-7', 'bulk'); // already waiting: nothing changes
    expect(q.depth()).toBe(1001);
    q.start();
    await q.idle();
    expect(seen.slice(0, 2)).toEqual(['live-a', 'bulk-500']);
    expect(seen).toHaveLength(1001);
    expect(seen.filter((k) => k === 'bulk-500')).toHaveLength(1);
    expect(q.depth()).toBe(0);
  });

  test('while a bulk backlog drains, a live key waits for one free slot only', async () => {
    const timers = new FakeTimers();
    const g = gatedHandler();
    const q = new WorkQueue({ handler: g.handler, concurrency: 2, timers });
    q.start();
    for (let i = 0; i < 20_000; i++) q.add(`k${i}`, 'bulk');
    await flush();
    expect(g.runs.map((r) => r.key)).toEqual(['k0', 'k1']);
    q.add('edit');
    g.runs[0]!.done();
    await flush();
    expect(g.runs.map((r) => r.key)).toEqual(['k0', 'k1', 'edit']);
    expect(q.depth()).toBe(19_998);
  });

  test('bulk keys leave an eighth of the slots to live keys: a live key starts at once', async () => {
    const timers = new FakeTimers();
    const g = gatedHandler();
    const q = new WorkQueue({ handler: g.handler, concurrency: 16, timers });
    q.start();
    for (let i = 0; i < 1000; i++) q.add(`k${i}`, 'bulk');
    await flush();
    expect(g.runs).toHaveLength(14); // 2 of 16 kept
    q.add('edit');
    q.add('edit-2');
    await flush();
    expect(g.runs.map((r) => r.key).slice(14)).toEqual(['edit', 'edit-2']);
    q.add('edit-3'); // every slot busy: waits for the next one free, ahead of the bulk keys
    g.runs[0]!.done();
    await flush();
    expect(g.runs.map((r) => r.key).slice(16)).toEqual(['edit-3']);
    g.runs[14]!.done(); // a live run ends: bulk work takes it back up to 14 bulk runs (13 ran), no further
    await flush();
    expect(g.runs).toHaveLength(18);
    expect(g.runs[17]!.key).toMatch(/^k/);
    g.runs[15]!.done(); // 14 bulk runs: this slot stays free for live work
    await flush();
    expect(g.runs).toHaveLength(18);
  });

  test('a key running and added again keeps the higher priority for its next run', async () => {
    const timers = new FakeTimers();
    const g = gatedHandler();
    const q = new WorkQueue({ handler: g.handler, concurrency: 1, timers });
    q.start();
    q.add('x', 'bulk');
    await flush();
    q.add('b1', 'bulk');
    q.add('x', 'bulk');
    q.add('x'); // live now
    expect(q.depth()).toBe(1); // b1; x waits for its own run to end
    g.runs[0]!.done();
    await flush();
    expect(g.runs.map((r) => r.key)).toEqual(['x', 'x']);
    g.runs[1]!.done();
    await flush();
    expect(g.runs.map((r) => r.key)).toEqual(['x', 'x', 'b1']);
    g.runs[2]!.done();
    await q.idle();
    expect(q.depth()).toBe(0);
  });
});
