/**
 * The limiter engine's contract with the proxy: given a request's API, endpoint and session,
 * answer allow / deny with the numbers for the X-RateLimit-* headers. No HTTP in here.
 */
import type { ClientKey, CompiledApi } from '../../contract/config.js';
import type { StoredSession } from '../../contract/sessions.js';
import type { MaybePromise } from '../../limiters/types.js';
import type { ThrottleWait } from './throttle.js';

export interface HeaderNumbers {
  limit: number;
  remaining: number;
  /** Unix seconds when one more request will be admitted. */
  reset: number;
}

/** ThrottleWait: how a throttled request learns that its client left or its key was revoked (optional). */
export interface CheckRequest extends ThrottleWait {
  api: CompiledApi;
  method: string;
  /** Path relative to the API's listen path, starting with '/'. */
  path: string;
  /** Absent for keyless APIs. */
  keyHash?: string;
  session?: StoredSession;
  /**
   * The client of a per-client API limit (docs/contract.md#limit-by), asked only when the matched limit has one: its
   * address identity (`ip`: client-address.ts) or the header's value ('' when absent). Absent: ''.
   */
  client?(by: ClientKey): string;
}

export type Verdict =
  | { kind: 'allow'; headers?: HeaderNumbers }
  | { kind: 'api_limited'; headers?: HeaderNumbers; retryAfter: number }
  | { kind: 'key_limited'; headers?: HeaderNumbers; retryAfter: number }
  | { kind: 'quota_exceeded'; headers?: HeaderNumbers; retryAfter: number }
  /** A limit or quota needs the shared store and it is unreachable (kv_failure_mode closed): 503, not a 429. */
  | { kind: 'unavailable'; headers?: undefined; retryAfter: number }
  /** A throttled request abandoned while it waited: its client left, or its key no longer admits it (403). */
  | { kind: 'disallowed'; headers?: undefined; retryAfter?: undefined };

/** A refusal by a limit or quota: it carries Retry-After. */
export type LimitRefusal = Exclude<Extract<Verdict, { retryAfter: number }>, { kind: 'unavailable' }>;

export interface Engine {
  /** Synchronous when every limit involved is in process; a promise when the store answers. */
  check(req: CheckRequest): MaybePromise<Verdict>;
}
