/** Exponential backoff: baseMs doubled per attempt (1-based), capped at maxMs. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempt - 1, 30));
}
