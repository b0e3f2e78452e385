/** Duration strings of the schemas ("10s", "500ms", "1m", "1h"): one parser for the OAS form and streams. */
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** "10s" → 10000. Throws on anything else (schemas validate first, so this is a programming error). */
export function durationMs(d: string): number {
  const m = DURATION.exec(d);
  if (!m) throw new Error(`invalid duration ${JSON.stringify(d)}`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}

/** "10s" → 10; "500ms" → 0.5. */
export function durationSeconds(d: string): number {
  return durationMs(d) / 1000;
}
