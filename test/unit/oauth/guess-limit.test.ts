/** The OAuth guess limits (sidecar/oauth/guess-limit.ts, docs/oauth.md "Guessing") on an injected clock. */
import { GuessLimiter } from '../../../sidecar/oauth/guess-limit.js';

const limits = { perClientAddress: 10, perAddress: 50, perClient: 1000, windowMs: 60_000 };

test('a guesser locks out only itself: its pair is refused, the client from another address is not', () => {
  let now = 1_000_000;
  const g = new GuessLimiter(limits, () => now);
  for (let i = 0; i < 10; i++) g.failed('c', '10.0.0.1');
  expect(g.retryAfter('c', '10.0.0.1')).toBe(60);
  expect(g.retryAfter('c', '10.0.0.2')).toBe(0);
  expect(g.retryAfter('other', '10.0.0.1')).toBe(0); // the address's own budget (50) is not spent
  now += 60_000;
  expect(g.retryAfter('c', '10.0.0.1')).toBe(0);
});

test('past the per-client ceiling a source that failed for the client is refused at once; a clean one is served', () => {
  const now = 1_000_000;
  const g = new GuessLimiter(limits, () => now);
  for (let a = 0; a < 100; a++) for (let i = 0; i < 10; i++) g.failed('c', `10.1.${a}.1`); // 1,000 failures
  g.failed('c', '10.2.0.1'); // a new guessing address: one failure
  expect(g.retryAfter('c', '10.2.0.1')).toBeGreaterThan(0);
  expect(g.retryAfter('c', '10.9.9.9')).toBe(0); // the real client, which never failed
});

test('per address over every client: 50 failures lock the address', () => {
  const now = 1_000_000;
  const g = new GuessLimiter(limits, () => now);
  for (let i = 0; i < 50; i++) g.failed(`c${i}`, '10.0.0.1');
  expect(g.retryAfter('fresh', '10.0.0.1')).toBeGreaterThan(0);
  expect(g.retryAfter('fresh', '10.0.0.2')).toBe(0);
});
