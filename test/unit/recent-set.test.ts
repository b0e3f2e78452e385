/** lib/recent-set.ts: at most `max` names; a new name evicts one not used since the scan last passed it. */
import { RecentSet } from '../../lib/recent-set.js';

test('never more than max names; names used once leave oldest first', () => {
  const evicted: string[] = [];
  const s = new RecentSet(3, (n) => evicted.push(n));
  for (const n of ['a', 'b', 'c', 'd', 'e']) s.touch(n);
  expect(s.size).toBe(3);
  expect(evicted).toEqual(['a', 'b']);
  expect([s.has('c'), s.has('d'), s.has('e')]).toEqual([true, true, true]);
});

test('a name used again survives the next eviction (second chance); touching a held name evicts nothing', () => {
  const evicted: string[] = [];
  const s = new RecentSet(3, (n) => evicted.push(n));
  for (const n of ['a', 'b', 'c']) s.touch(n);
  s.touch('a');
  s.touch('a');
  expect(evicted).toEqual([]);
  s.touch('d'); // a was used: b goes
  expect(evicted).toEqual(['b']);
  expect(s.has('a')).toBe(true);
  s.touch('e'); // c was not used since it was added
  expect(evicted).toEqual(['b', 'c']);
});

test('every name used: one full pass unmarks them and the oldest goes', () => {
  const evicted: string[] = [];
  const s = new RecentSet(4, (n) => evicted.push(n));
  for (const n of ['a', 'b', 'c', 'd']) s.touch(n);
  for (const n of ['a', 'b', 'c', 'd']) s.touch(n);
  s.touch('x');
  expect(evicted).toEqual(['a']);
  expect(s.size).toBe(4);
});

test('a hot name among a million rotating ones stays; the set stays at max', () => {
  let evictions = 0;
  const s = new RecentSet(1000, () => evictions++);
  for (let i = 0; i < 1_000_000; i++) {
    s.touch('hot');
    s.touch(`c${i}`);
  }
  expect(s.has('hot')).toBe(true);
  expect(s.size).toBe(1000);
  expect(evictions).toBe(1_000_000 + 1 - 1000);
});

test('delete removes without calling onEvict; max below 1 is refused', () => {
  const evicted: string[] = [];
  const s = new RecentSet(2, (n) => evicted.push(n));
  s.touch('a');
  s.delete('a');
  expect(s.size).toBe(0);
  expect(evicted).toEqual([]);
  expect(() => new RecentSet(0, () => undefined)).toThrow(/max must be at least 1/);
});
