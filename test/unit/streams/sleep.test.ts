import { sleep } from '../../../streams/duration.js';

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('streams sleep (node:timers/promises)', () => {
  test('resolves after the delay', async () => {
    const t0 = performance.now();
    await sleep(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
  });

  test("an abort rejects at once with the signal's reason and leaves no timer", async () => {
    const ac = new AbortController();
    const before = timers();
    const slept = sleep(60_000, ac.signal);
    expect(timers()).toBe(before + 1);
    const stopped = new Error('stopped');
    ac.abort(stopped);
    await expect(slept).rejects.toBe(stopped);
    expect(timers()).toBe(before);
    await expect(sleep(10, ac.signal)).rejects.toBe(stopped); // already aborted
  });

  test('an abort without an Error reason rejects with an AbortError', async () => {
    const ac = new AbortController();
    const slept = sleep(60_000, ac.signal);
    ac.abort('plain string');
    await expect(slept).rejects.toMatchObject({ name: 'AbortError' });
  });
});
