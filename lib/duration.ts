/**
 * Duration strings of the schemas ("10s", "500ms", "1m", "1h", and Go-style sequences such as "1m30s"
 * or "1h15m", as Tyk's OAS form writes them): one parser for the OAS form and streams.
 */
export const DURATION_PATTERN = /^(\d+(\.\d+)?(ms|s|m|h))+$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** "10s" → 10000, "1m30s" → 90000. Throws on anything else (schemas validate first, so this is a programming error). */
export function durationMs(d: string): number {
  if (!DURATION_PATTERN.test(d)) throw new Error(`invalid duration ${JSON.stringify(d)}`);
  let ms = 0;
  for (const m of d.matchAll(PART)) ms += Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return ms;
}

/** "10s" → 10; "500ms" → 0.5. */
export function durationSeconds(d: string): number {
  return durationMs(d) / 1000;
}
