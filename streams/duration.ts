/** Timing helpers of the stream components; duration strings are parsed by lib/duration.ts. */
export { durationMs } from '../lib/duration.js';

const { setTimeout: delay } = process.getBuiltinModule('node:timers/promises');

/**
 * Resolves after `ms`, rejects with the signal's reason when it aborts first (node:timers/promises
 * rejects with an AbortError instead; the stream components report the reason they aborted with).
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await delay(Math.max(0, ms), undefined, signal ? { signal } : undefined);
  } catch (e) {
    throw signal?.aborted ? abortReason(signal) : e;
  }
}

export function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new DOMException('aborted', 'AbortError');
}
