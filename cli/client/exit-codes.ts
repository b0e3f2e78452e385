/**
 * Exit codes of the client commands (`gw keys|oauth|proxy`): one per thing a pipeline can act on.
 * Documented in docs/facade.md ("CLI for pipelines"); keep the two in step.
 */
export const Exit = {
  /** The facade answered 2xx; its answer is on stdout. */
  OK: 0,
  /** Bad command line or input read locally (flags, --body JSON, --body-file); nothing was sent. */
  USAGE: 1,
  /** 404: no such API, key or client. */
  NOT_FOUND: 2,
  /** 401/403, or no credential configured: the token or secret is missing or wrong. */
  AUTH: 3,
  /** 400, 405, 409, 413, 415: the facade refused the request as invalid or conflicting. */
  REFUSED: 4,
  /** The facade could not be reached, timed out, answered 5xx, or did not answer JSON. */
  UNAVAILABLE: 5,
  /** 429: the facade rate-limited this client (Retry-After in the message). */
  RATE_LIMITED: 6,
  /** `gw proxy`: the facade answered 502/504: the gateway behind it could not be reached or timed out. */
  GATEWAY_UNAVAILABLE: 7,
  /** `gw proxy --fail`: the proxied request itself got a status ≥ 400 (the answer is still printed). */
  PROXIED_ERROR: 8,
  /**
   * 504 on a write (cluster): the resource was written and exists, but the controller did not report it
   * Ready in time. It takes effect once reconciled; repeating the same command is safe (`gw keys create`
   * prints the key it wrote all the same: repeat with that key).
   */
  NOT_READY: 9,
} as const;

export type ExitCode = (typeof Exit)[keyof typeof Exit];

/** A failure with its exit code and one line for stderr. */
export class ClientError extends Error {
  constructor(
    readonly code: ExitCode,
    message: string,
  ) {
    super(message);
  }
}

/** Exit code for a facade HTTP status (the facade's own answer, not a proxied one). */
export function exitForStatus(status: number, proxy = false): ExitCode {
  if (status >= 200 && status < 300) return Exit.OK;
  if (status === 404) return Exit.NOT_FOUND;
  if (status === 401 || status === 403) return Exit.AUTH;
  if (status === 429) return Exit.RATE_LIMITED;
  if (proxy && (status === 502 || status === 504)) return Exit.GATEWAY_UNAVAILABLE;
  if (!proxy && status === 504) return Exit.NOT_READY;
  if (status >= 400 && status < 500) return Exit.REFUSED;
  return Exit.UNAVAILABLE;
}
