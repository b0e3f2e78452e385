/**
 * The limiter engine's contract with the proxy: given a request's API, endpoint and session,
 * answer allow / deny with the numbers for the X-RateLimit-* headers. No HTTP in here.
 */
import type { CompiledApi } from '../config/types.js';
import type { StoredSession } from '../../lib/sessions.js';
import type { MaybePromise } from '../limiters/types.js';

export interface HeaderNumbers {
  limit: number;
  remaining: number;
  /** Unix seconds when one more request will be admitted. */
  reset: number;
}

export interface CheckRequest {
  api: CompiledApi;
  method: string;
  /** Path relative to the API's listen path, starting with '/'. */
  path: string;
  /** Absent for keyless APIs. */
  keyHash?: string;
  session?: StoredSession;
}

export type Verdict =
  | { kind: 'allow'; headers?: HeaderNumbers }
  | { kind: 'api_limited'; headers?: HeaderNumbers; retryAfter: number }
  | { kind: 'key_limited'; headers?: HeaderNumbers; retryAfter: number }
  | { kind: 'quota_exceeded'; headers?: HeaderNumbers; retryAfter: number };

export interface Engine {
  /** Synchronous when every limit involved is in process; a promise when the store answers. */
  check(req: CheckRequest): MaybePromise<Verdict>;
}
