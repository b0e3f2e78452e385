/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): reading an incoming `traceparent`, and the
 * `traceparent` a hop sends on with its own span id as the parent. Strings only: no object per request,
 * so propagation costs the random span id and the header string when span export is off.
 */
const { randomFillSync } = process.getBuiltinModule('node:crypto');

/**
 * Random bytes from the CSPRNG as lower-case hex, handed out 16 or 32 digits at a time: one conversion per
 * refill, so an id costs a slice of a string rather than a buffer-to-hex call.
 */
const POOL = Buffer.alloc(4096);
let hex = '';
let hexAt = 0;

function randomHex(digits: number): string {
  if (hexAt + digits > hex.length) {
    randomFillSync(POOL);
    hex = POOL.toString('hex');
    hexAt = 0;
  }
  const s = hex.slice(hexAt, hexAt + digits);
  hexAt += digits;
  return s;
}

const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_SPAN = '0000000000000000';

/** A new 8-byte span id in lower-case hex (never all zeros). */
export function newSpanId(): string {
  const id = randomHex(16);
  return id === ZERO_SPAN ? newSpanId() : id;
}

/** A new 16-byte trace id in lower-case hex (never all zeros). */
export function newTraceId(): string {
  const id = randomHex(32);
  return id === ZERO_TRACE ? newTraceId() : id;
}

/** Lower-case hex digit at s[i]. */
function isHex(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return (c >= 48 && c <= 57) || (c >= 97 && c <= 102);
}

function hexRun(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (!isHex(s, i)) return false;
  return true;
}

/**
 * Whether `v` is a traceparent this gateway continues (W3C §3.2): `version-traceid-parentid-flags` in
 * lower-case hex; version `ff` invalid; all-zero trace or parent id invalid; version 00 exactly 55
 * characters; a later version at least 55, with a `-` after the flags when longer (its extra fields are
 * ignored). Several header lines (a string array) are invalid: the context is ambiguous.
 */
export function validTraceparent(v: string | string[] | undefined): v is string {
  if (typeof v !== 'string' || v.length < 55) return false;
  if (v.charCodeAt(2) !== 45 || v.charCodeAt(35) !== 45 || v.charCodeAt(52) !== 45) return false;
  if (!hexRun(v, 0, 2) || (v.charCodeAt(0) === 102 && v.charCodeAt(1) === 102)) return false; // ff
  if (v.charCodeAt(0) === 48 && v.charCodeAt(1) === 48) {
    if (v.length !== 55) return false;
  } else if (v.length > 55 && v.charCodeAt(55) !== 45) return false;
  if (!hexRun(v, 3, 35) || !hexRun(v, 36, 52) || !hexRun(v, 53, 55)) return false;
  return !v.startsWith(ZERO_TRACE, 3) && !v.startsWith(ZERO_SPAN, 36);
}

/** The trace id of a valid traceparent. */
export function traceIdOf(traceparent: string): string {
  return traceparent.slice(3, 35);
}

/** The parent (span) id of a valid traceparent. */
export function parentIdOf(traceparent: string): string {
  return traceparent.slice(36, 52);
}

/** Whether a valid traceparent's sampled flag (bit 0 of trace-flags) is set. */
export function sampledOf(traceparent: string): boolean {
  return (parseInt(traceparent.slice(53, 55), 16) & 1) === 1;
}

export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
}

/**
 * The traceparent a hop that records no span sends on: the incoming trace id and sampled flag with a new
 * span id as parent; a new trace when the incoming header is absent or invalid. A new trace is marked
 * sampled: a hop that exports nothing leaves the sampling decision to the services behind it (with their
 * parent-based samplers they record as they did before the gateway stood in front of them).
 */
export function childTraceparent(incoming: string | string[] | undefined): string {
  if (validTraceparent(incoming))
    return `00-${incoming.slice(3, 35)}-${newSpanId()}-${(parseInt(incoming.slice(53, 55), 16) & 1) === 1 ? '01' : '00'}`;
  return `00-${newTraceId()}-${newSpanId()}-01`;
}

/** W3C Trace Context's bounds on a forwarded tracestate: at most 32 list members; 512 characters is what every vendor keeps. */
export const TRACESTATE_MAX_MEMBERS = 32;
export const TRACESTATE_MAX_CHARS = 512;
const TRACESTATE_MEMBER_FIRST_CUT = 128;

/**
 * A tracestate within its bounds, truncated as W3C Trace Context says: members over 128 characters go
 * first, then members from the end, until at most 32 remain within 512 characters; undefined when none does.
 */
export function boundedTracestate(v: string | string[]): string | undefined {
  const joined = typeof v === 'string' ? v : v.join(',');
  if (
    joined.length <= TRACESTATE_MAX_CHARS &&
    joined.split(',', TRACESTATE_MAX_MEMBERS + 1).length <= TRACESTATE_MAX_MEMBERS
  )
    return joined;
  let members = joined
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  const size = (ms: string[]): number => ms.reduce((n, m) => n + m.length, 0) + Math.max(0, ms.length - 1);
  if (members.length <= TRACESTATE_MAX_MEMBERS && size(members) <= TRACESTATE_MAX_CHARS) return members.join(',');
  members = members.filter((m) => m.length <= TRACESTATE_MEMBER_FIRST_CUT).slice(0, TRACESTATE_MAX_MEMBERS);
  while (members.length > 0 && size(members) > TRACESTATE_MAX_CHARS) members.pop();
  return members.length > 0 ? members.join(',') : undefined;
}

/**
 * Trace context for an outgoing request built from `out` (headers in lower case): continues the trace of
 * `out`'s own traceparent when valid, else the one of `incoming` (with its tracestate), else a new trace.
 * A tracestate whose traceparent is not continued is dropped.
 */
export function propagateTrace(
  out: Record<string, string | string[]>,
  incoming: Record<string, string | string[] | undefined> = {},
): void {
  const own = out.traceparent;
  if (validTraceparent(own)) {
    out.traceparent = childTraceparent(own);
    return;
  }
  delete out.tracestate;
  const from = incoming.traceparent;
  out.traceparent = childTraceparent(from);
  const state = incoming.tracestate;
  const bounded = validTraceparent(from) && state !== undefined ? boundedTracestate(state) : undefined;
  if (bounded !== undefined) out.tracestate = bounded;
}
