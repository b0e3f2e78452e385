import { ManualClock } from '../../../lib/clock.js';
import {
  LocalRateLimit,
  RateLimitQueueFullError,
  realTimers,
  type Permit,
  type Timers,
} from '../../../streams/rate-limit.js';

/** Timers driven by a ManualClock: advance() moves the clock and fires what is due, in order. */
class FakeTimers implements Timers {
  private seq = 0;
  private pending = new Map<number, { at: number; fn: () => void }>();
  constructor(readonly clock: ManualClock) {}
  set(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.clock.now() + ms, fn });
    return id;
  }
  clear(h: unknown): void {
    this.pending.delete(h as number);
  }
  get armed(): number {
    return this.pending.size;
  }
  async advance(ms: number): Promise<void> {
    const end = this.clock.now() + ms;
    for (;;) {
      const due = [...this.pending.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.clock.set(Math.max(this.clock.now(), due[1].at));
      due[1].fn();
      await flush();
    }
    this.clock.set(end);
    await flush();
  }
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

function setup(count: number, intervalMs: number, maxWaiting?: number) {
  const clock = new ManualClock(0);
  const timers = new FakeTimers(clock);
  const rl = new LocalRateLimit({ count, intervalMs, clock, timers, maxWaiting, label: 't' });
  return { clock, timers, rl };
}

/** acquire() that records when it was granted and releases at once. */
function take(rl: LocalRateLimit, clock: ManualClock, log: number[], signal?: AbortSignal): Promise<Permit> {
  return rl.acquire(signal).then((p) => {
    log.push(clock.now());
    p.release();
    return p;
  });
}

describe('LocalRateLimit (injected clock and timers)', () => {
  test('grants count accesses at once, then makes the next caller wait exactly until a slot frees', async () => {
    const { clock, timers, rl } = setup(3, 1000);
    const granted: number[] = [];
    for (let i = 0; i < 3; i++) await take(rl, clock, granted);
    expect(granted).toEqual([0, 0, 0]);
    const fourth = take(rl, clock, granted);
    await flush();
    expect(granted).toHaveLength(3);
    expect(rl.waiting).toBe(1);
    expect(timers.armed).toBe(1); // one timer, no polling
    await timers.advance(999);
    expect(granted).toHaveLength(3);
    await timers.advance(1);
    expect((await fourth).waitedMs).toBe(1000);
    expect(granted).toEqual([0, 0, 0, 1000]);
  });

  test('any window of length interval holds at most count grants (sliding window, FIFO)', async () => {
    const { clock, timers, rl } = setup(5, 1000);
    const granted: number[] = [];
    const all = Array.from({ length: 23 }, () => take(rl, clock, granted));
    await flush();
    for (let i = 0; i < 60 && granted.length < 23; i++) await timers.advance(100);
    await Promise.all(all);
    expect(granted).toHaveLength(23);
    for (let i = 0; i + 5 < granted.length; i++) expect(granted[i + 5]! - granted[i]!).toBeGreaterThanOrEqual(1000);
    expect(granted.slice(0, 6)).toEqual([0, 0, 0, 0, 0, 1000]);
  });

  test('a slot stays taken while the access is in flight and frees interval after release', async () => {
    const { clock, timers, rl } = setup(1, 1000);
    const p = await rl.acquire();
    let second: Permit | undefined;
    void rl.acquire().then((x) => (second = x));
    await timers.advance(5000);
    expect(second).toBeUndefined(); // in flight: no timer can help, only the release
    p.release(); // released at t=5000
    await timers.advance(999);
    expect(second).toBeUndefined();
    await timers.advance(1);
    expect(second).toBeDefined();
    expect(clock.now()).toBe(6000);
  });

  test('the waiting queue is bounded: beyond it acquire rejects at once', async () => {
    const { clock, timers, rl } = setup(1, 1000, 2);
    await take(rl, clock, []);
    const a = rl.acquire();
    const b = rl.acquire();
    await expect(rl.acquire()).rejects.toBeInstanceOf(RateLimitQueueFullError);
    await timers.advance(2000);
    await expect(a).resolves.toBeDefined();
    (await a).release();
    await timers.advance(1000);
    await expect(b).resolves.toBeDefined();
  });

  test('an aborted waiter leaves the queue; the others keep their turn', async () => {
    const { clock, timers, rl } = setup(1, 1000);
    await take(rl, clock, []);
    const ac = new AbortController();
    const a = rl.acquire(ac.signal);
    const b = rl.acquire();
    ac.abort(new Error('stop'));
    await expect(a).rejects.toThrow('stop');
    expect(rl.waiting).toBe(1);
    await timers.advance(1000);
    await expect(b).resolves.toBeDefined();
  });

  test('a newcomer does not overtake waiters', async () => {
    const { clock, timers, rl } = setup(1, 1000);
    await take(rl, clock, []);
    const order: string[] = [];
    const a = rl.acquire().then((p) => (order.push('a'), p.release()));
    clock.advance(1000); // the slot is free by the clock, but the timer has not fired yet
    expect(rl.tryAcquire()).toBeNull();
    const b = rl.acquire().then((p) => (order.push('b'), p.release()));
    await timers.advance(0);
    await a;
    expect(order).toEqual(['a']);
    await timers.advance(1000);
    await b;
    expect(order).toEqual(['a', 'b']);
  });

  test('configure() keeps the history and serves waiters when the count grows', async () => {
    const { clock, rl } = setup(1, 1000);
    await take(rl, clock, []);
    let got = false;
    const w = rl.acquire().then((p) => ((got = true), p));
    await flush();
    expect(got).toBe(false);
    rl.configure(2, 1000);
    (await w).release();
    expect(got).toBe(true);
    expect(rl.tryAcquire()).toBeNull(); // 2 used in the window
  });

  test('defaults of a resource: 1000 per 1s', async () => {
    const { StreamingSpec } = await import('../../../crds/schemas/streaming.js');
    const s = StreamingSpec.parse({ rate_limit_resources: [{ label: 'x' }] });
    expect(s.rate_limit_resources[0]!.local).toEqual({ count: 1000, interval: '1s' });
    const { clock, timers, rl } = setup(1000, 1000);
    const granted: number[] = [];
    await Promise.all(Array.from({ length: 1000 }, () => take(rl, clock, granted)));
    const extra = take(rl, clock, granted);
    await timers.advance(999);
    expect(granted).toHaveLength(1000);
    await timers.advance(1);
    await extra;
    expect(granted).toHaveLength(1001);
  });
});

describe('long windows with the real timers', () => {
  test('a 600h window (longer than Node’s 2^31−1 ms timer limit) makes the next caller wait on one timer, with no TimeoutOverflowWarning', async () => {
    // jest gives tests their own `process`; warnings are emitted on the real one
    const real = process.getBuiltinModule('node:process');
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    real.on('warning', onWarning);
    let armed = 0;
    const counting: Timers = { set: (fn, ms) => (armed++, realTimers.set(fn, ms)), clear: (h) => realTimers.clear(h) };
    const rl = new LocalRateLimit({ count: 2, intervalMs: 600 * 3_600_000, label: 'month', timers: counting });
    try {
      (await rl.acquire()).release();
      (await rl.acquire()).release();
      let granted = false;
      const third = rl.acquire().then(
        () => (granted = true),
        (e: Error) => e.message,
      );
      await new Promise((r) => setTimeout(r, 200));
      expect(granted).toBe(false);
      expect(rl.waiting).toBe(1);
      expect(armed).toBe(1); // not a timer firing every millisecond
      expect(warnings.filter((w) => w.startsWith('TimeoutOverflowWarning'))).toEqual([]);
      rl.close(new Error('test over'));
      expect(await third).toBe('test over');
    } finally {
      real.off('warning', onWarning);
      rl.close();
    }
  });
});
