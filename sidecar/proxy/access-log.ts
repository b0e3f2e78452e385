/**
 * Access logs (docs/contract.md#observability, `access_logs.enabled`): one JSON line per request on stdout, in pino's line
 * format (`level`, `time`, `component`, the record, `msg`), written through an asynchronous
 * sonic-boom destination (lib/stdout-destination.ts: a stalled or closed stdout cannot keep the process from exiting).
 *   The line is built by a serialiser of this one fixed shape (accessLine): pino's generic one walks the
 *   record's keys and escapes each string character by character, which would make it the largest part of
 *   an access-logged request's added CPU (docs/observability.md, "What access logs cost").
 *   Lines are collected and handed to the destination as one string once BATCH_BYTES are collected or
 *   FLUSH_MS after the first: one write(2) for a few hundred lines, and the destination sees one flat
 *   string per batch (sonic-boom measures the byte length of the string it appends to on every write, so
 *   appending line by line would flatten the growing batch again for every line).
 *   Memory stays bounded when stdout does not drain (a stalled log reader): beyond MAX_BUFFERED_BYTES
 *   lines are dropped, and counted (gw_access_log_dropped_total).
 * Its own lines, not the process logger's: that one redacts a field named `key`, and these lines carry
 * only a key hash's first 8 hex.
 */
import { stdoutDestination } from '../../lib/stdout-destination.js';

/** The five decisions of docs/contract.md#observability, and `unavailable`: a limit needed the unreachable store (kv_failure_mode closed, 503). */
export type AccessDecision = 'allow' | 'api_limited' | 'key_limited' | 'quota' | 'auth' | 'unavailable';

export interface AccessRecord {
  api_id: string;
  method: string;
  /** The normalised request path, without the query string. */
  path: string;
  status: number;
  /** Milliseconds (written rounded to the microsecond). */
  latency_ms: number;
  /** null when the request was not forwarded. */
  upstream_latency_ms: number | null;
  decision: AccessDecision;
  /** First 8 hex digits of the key's SHA-256 hash; null without a key. */
  key: string | null;
  trace_id: string;
  client_ip: string;
  /** `1.1` or `2` (HTTP/2, TLS or h2c); `grpc` for a gRPC call over HTTP/2. */
  protocol: string;
}

export interface AccessLog {
  write(r: AccessRecord): void;
  /** Writes out what is buffered (shutdown). */
  flush(): void;
  /** Lines dropped because stdout did not drain (MAX_BUFFERED_BYTES reached). */
  dropped(): number;
}

/**
 * Characters collected before the batch is handed to the destination: a pipe's default capacity on Linux.
 * Each write wakes the reader of stdout (the container runtime's log shim, or the bench's runner), and the
 * wake-up, not the copy, is what a write costs: larger batches wake it less often (docs/observability.md,
 * "What access logs cost").
 */
export const BATCH_BYTES = 64 * 1024;
/** A line waits at most this long for its write (ms): at low traffic a batch is written before it is full. */
export const FLUSH_MS = 250;
/** What the destination may hold unwritten (a stalled reader); lines beyond it are dropped. */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/** Strings JSON writes as they are: printable ASCII without `"` and `\`. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
/** A string as a JSON string literal. */
export function jsonString(s: string): string {
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}
const jsonNumber = (n: number): string => (Number.isFinite(n) ? String(n) : 'null');

/**
 * Milliseconds rounded to the microsecond as a JSON number, from integers (a double's shortest decimal
 * form costs more than the rest of the line): 1.23 is written 1.230.
 */
export function msText(ms: number): string {
  if (!(ms >= 0 && ms < 1e9)) return jsonNumber(roundMs(ms));
  const us = Math.round(ms * 1000);
  const whole = Math.floor(us / 1000);
  const frac = us - whole * 1000;
  return frac === 0 ? String(whole) : `${whole}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}`;
}

/** The line's start: pino's level and time, then its `base` (only `component`), fixed for the process. */
const HEAD = `{"level":30,"time":`;
const BASE = `,"component":"access"`;

/** One access line (with its newline): the same JSON pino would write for `info(r, 'access')`. */
export function accessLine(r: AccessRecord, time: number): string {
  return `${HEAD}${time}${BASE},"api_id":${jsonString(r.api_id)},"method":${jsonString(r.method)},"path":${jsonString(r.path)},"status":${jsonNumber(r.status)},"latency_ms":${msText(r.latency_ms)},"upstream_latency_ms":${r.upstream_latency_ms === null ? 'null' : msText(r.upstream_latency_ms)},"decision":"${r.decision}","key":${r.key === null ? 'null' : jsonString(r.key)},"trace_id":${jsonString(r.trace_id)},"client_ip":${jsonString(r.client_ip)},"protocol":${jsonString(r.protocol)},"msg":"access"}\n`;
}

/** `onDrop`: lines were dropped (stdout not draining), with how many. */
export function createAccessLog(fd = 1, onDrop?: (lines: number) => void): AccessLog {
  let dropped = 0;
  const { dest, flush: flushDest } = stdoutDestination(fd, MAX_BUFFERED_BYTES);
  dest.on('drop', (data: string) => {
    const n = countLines(data);
    dropped += n;
    onDrop?.(n);
  });
  let lines: string[] = [];
  let size = 0;
  let timer: NodeJS.Timeout | undefined;
  const writeOut = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (lines.length === 0) return;
    const batch = lines.join('');
    lines = [];
    size = 0;
    dest.write(batch);
  };
  const flush = (): void => {
    writeOut();
    flushDest();
  };
  process.once('exit', flush);
  return {
    write(r) {
      const line = accessLine(r, Date.now());
      lines.push(line);
      size += line.length;
      if (size >= BATCH_BYTES) writeOut();
      else if (timer === undefined) (timer = setTimeout(writeOut, FLUSH_MS)).unref();
    },
    flush,
    dropped: () => dropped,
  };
}

function countLines(s: string): number {
  let n = 0;
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) n++;
  return n;
}

/** Milliseconds with microsecond precision (a number, not a string). */
export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
