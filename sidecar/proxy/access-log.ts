/**
 * Access logs (SPEC.md §7, `access_logs.enabled`): one JSON line per request on stdout through pino with an
 * asynchronous destination that writes once BATCH_BYTES are buffered, or every FLUSH_MS (one write for many
 * lines instead of one per request). Its own pino: the process logger redacts a field named `key`, and these
 * lines carry only a key hash's first 8 hex.
 */
import { pino } from 'pino';

/** SPEC §7's five, and `unavailable`: a limit needed the unreachable store (kv_failure_mode closed, 503). */
export type AccessDecision = 'allow' | 'api_limited' | 'key_limited' | 'quota' | 'auth' | 'unavailable';

export interface AccessRecord {
  api_id: string;
  method: string;
  /** The normalised request path, without the query string. */
  path: string;
  status: number;
  latency_ms: number;
  /** null when the request was not forwarded. */
  upstream_latency_ms: number | null;
  decision: AccessDecision;
  /** First 8 hex digits of the key's SHA-256 hash; null without a key. */
  key: string | null;
  trace_id: string;
  client_ip: string;
}

export interface AccessLog {
  write(r: AccessRecord): void;
  /** Writes out what is buffered (shutdown). */
  flush(): void;
}

/** Bytes buffered before a write. */
export const BATCH_BYTES = 8192;
/** A line waits at most this long for a write (ms). */
export const FLUSH_MS = 250;

export function createAccessLog(fd = 1): AccessLog {
  const dest = pino.destination({ dest: fd, sync: false, minLength: BATCH_BYTES, periodicFlush: FLUSH_MS });
  const log = pino({ base: { component: 'access' }, messageKey: 'msg' }, dest);
  const flush = (): void => {
    try {
      dest.flushSync();
    } catch {
      // a write still in flight finishes on its own
    }
  };
  process.once('exit', flush);
  return { write: (r) => log.info(r, 'access'), flush };
}

/** Milliseconds with microsecond precision (a number, not a string). */
export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
