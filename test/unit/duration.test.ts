import { durationMs, durationSeconds } from '../../lib/duration.js';

describe('duration strings (OAS per-endpoint `per`, stream intervals)', () => {
  test.each([
    ['500ms', 500],
    ['1s', 1000],
    ['1.5s', 1500],
    ['2m', 120_000],
    ['1h', 3_600_000],
    ['1m30s', 90_000],
    ['1h15m', 4_500_000],
    ['1s500ms', 1500],
  ])('%s → %i ms', (d, ms) => {
    expect(durationMs(d)).toBe(ms);
    expect(durationSeconds(d)).toBe(ms / 1000);
  });

  test.each(['10', 's', '-1s', '1d', '1 s', '', '1m 30s', 'm30s', '1m30'])('%j is refused', (d) => {
    expect(() => durationMs(d)).toThrow(/invalid duration/);
  });
});
