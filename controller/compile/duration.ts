/** "10s" / "500ms" / "1m" / "1h" → seconds. */
export function durationSeconds(d: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(d);
  if (!m) throw new Error(`invalid duration ${JSON.stringify(d)}`);
  const n = Number(m[1]);
  switch (m[2]) {
    case 'ms':
      return n / 1000;
    case 'm':
      return n * 60;
    case 'h':
      return n * 3600;
    default:
      return n;
  }
}
