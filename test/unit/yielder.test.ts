/**
 * lib/yielder.ts: the slice is the event loop's, shared by every Yielder (an apply's steps each have
 * their own): work done under one Yielder since the last yield counts against the next one's slice.
 */
import { Yielder } from '../../lib/yielder.js';

const spin = (ms: number): void => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

test('a Yielder made after another one worked counts that work in its slice; a yield of either starts a new one', async () => {
  const first = new Yielder(50);
  await first.yield();
  spin(30);
  const second = new Yielder(50);
  spin(30);
  // 60 ms since the last yield: the second step's slice is used up although it ran 30 ms itself
  expect(second.due()).toBe(true);
  await second.yield();
  expect(first.due()).toBe(false);
});
