/**
 * One HTTP call of a stream component (http_client processor and output), with the rate-limit resource,
 * retries and Retry-After:
 * - every attempt (retries included) takes a permit of the named rate-limit resource and releases it when
 *   the response has been read;
 * - 2xx succeeds; 429, 408, 5xx and network errors/timeouts are retried with exponential backoff
 *   (initial_interval doubling up to max_interval), or after the peer's Retry-After (seconds or an HTTP
 *   date) when it sent one — during that pause no worker of the component calls the peer;
 * - any other status is a PermanentError (the message is rejected);
 * - max_retries 0 retries for ever; otherwise RetriesExhaustedError after max_retries retries;
 * - userinfo in the URL (http://user:pass@host) is sent as Basic authorization (an explicit
 *   authorization header wins); error messages show the URL redacted (no userinfo, no query values) and
 *   never quote a credential of the URL or a header value (lib/redact-url.ts).
 */
import { childTraceparent, validTraceparent } from '../lib/trace/trace-context.js';
import { Agent, request } from '../lib/http/undici.js';
import { STREAM_HTTP_KEEP_ALIVE_MS } from '../lib/tuning.js';
import type { Clock } from '../lib/clock.js';
import { redactUrl, scrub, urlSecrets } from '../lib/redact-url.js';
import { durationMs, sleep } from './duration.js';
import type { LocalRateLimit } from './rate-limit.js';
import { PermanentError, RetriesExhaustedError } from './types.js';

export interface HttpCallOptions {
  url: string;
  verb: string;
  headers: Record<string, string>;
  timeout: string;
  max_retries: number;
  backoff: { initial_interval: string; max_interval: string };
}

export interface HttpCallHooks {
  /** The rate-limit resource made this attempt wait. */
  onRateLimitWait?(waitedMs: number): void;
  /** An attempt failed and will be retried after `delayMs`. */
  onRetry?(reason: string, delayMs: number): void;
  /** W3C traceparent of the message's origin: every attempt continues its trace (else one new trace per call). */
  traceparent?: string;
}

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Longest Retry-After honoured (a peer asking for more is waited for this long, then retried). */
const MAX_RETRY_AFTER_MS = 3_600_000;

export function parseRetryAfter(v: string | string[] | undefined, now: number): number | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  if (s === undefined || s.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(s.trim())) return Math.min(Number(s.trim()) * 1000, MAX_RETRY_AFTER_MS);
  const t = Date.parse(s);
  if (Number.isNaN(t)) return undefined;
  return Math.min(Math.max(0, t - now), MAX_RETRY_AFTER_MS);
}

/**
 * The URL without its userinfo, and the userinfo as a Basic authorization value. undici sends only the
 * origin and path of a URL: without this the credentials of http://user:pass@host were dropped silently.
 */
export function splitUserinfo(raw: string): { url: string; authorization?: string } {
  const u = new URL(raw);
  if (!u.username && !u.password) return { url: raw };
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s; // a stray % is taken literally
    }
  };
  const userPass = `${decode(u.username)}:${decode(u.password)}`;
  u.username = '';
  u.password = '';
  return { url: u.href, authorization: `Basic ${Buffer.from(userPass).toString('base64')}` };
}

/** A request body and its content type. */
export interface Encoded {
  payload: string | Uint8Array;
  contentType: string;
}

export function encodeBody(body: unknown): Encoded {
  if (typeof body === 'string') return { payload: body, contentType: 'text/plain; charset=utf-8' };
  return { payload: JSON.stringify(body ?? null), contentType: 'application/json' };
}

export class HttpCaller {
  private readonly agent: Agent;
  private pausedUntil = 0;
  private readonly timeoutMs: number;
  private readonly initialMs: number;
  private readonly maxMs: number;
  /** The URL requested (userinfo moved to the headers) and the headers sent. */
  private readonly url: string;
  private readonly headers: Record<string, string>;
  /** "POST http://***@host/x?api_key=***": how errors name the call. */
  private readonly where: string;
  private readonly secrets: string[];
  /** The configured headers name a traceparent of their own: sent as configured. */
  private readonly fixedTrace: boolean;

  constructor(
    private readonly o: HttpCallOptions,
    private readonly limiter: LocalRateLimit | undefined,
    private readonly clock: Clock,
    connections = 8,
  ) {
    this.timeoutMs = durationMs(o.timeout);
    // undici's own header/body timeouts (300 s by default) would cut a longer `timeout` short.
    this.agent = new Agent({
      connections,
      keepAliveTimeout: STREAM_HTTP_KEEP_ALIVE_MS,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
    this.initialMs = durationMs(o.backoff.initial_interval);
    this.maxMs = Math.max(this.initialMs, durationMs(o.backoff.max_interval));
    const { url, authorization } = splitUserinfo(o.url);
    this.url = url;
    this.headers = { ...o.headers };
    if (authorization && !Object.keys(this.headers).some((h) => h.toLowerCase() === 'authorization'))
      this.headers.authorization = authorization;
    this.where = `${o.verb} ${redactUrl(o.url)}`;
    this.secrets = [...urlSecrets(o.url), ...Object.values(this.headers)];
    this.fixedTrace = Object.keys(this.headers).some((h) => h.toLowerCase() === 'traceparent');
  }

  /** `encode` gives the body to send (not called for GET). */
  async call(
    encode: () => Encoded | Promise<Encoded>,
    signal: AbortSignal,
    hooks: HttpCallHooks = {},
  ): Promise<HttpResult> {
    const headers: Record<string, string> = { ...this.headers };
    let payload: string | Uint8Array | undefined;
    if (this.o.verb !== 'GET') {
      const enc = await encode();
      payload = enc.payload;
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
        headers['content-type'] = enc.contentType;
    }
    // W3C trace context: one trace per call (the message's, when it came with one), a new span id per attempt
    const trace = validTraceparent(hooks.traceparent) ? hooks.traceparent : childTraceparent(undefined);
    for (let attempt = 0; ; attempt++) {
      if (!this.fixedTrace) headers.traceparent = childTraceparent(trace);
      const pause = this.pausedUntil - this.clock.now();
      if (pause > 0) await sleep(pause, signal);
      const permit = this.limiter ? await this.limiter.acquire(signal) : undefined;
      if (permit && permit.waitedMs > 0) hooks.onRateLimitWait?.(permit.waitedMs);
      let result: HttpResult | undefined;
      let error: unknown;
      try {
        const res = await request(this.agent, this.url, {
          method: this.o.verb as 'POST',
          headers,
          body: payload,
          signal: AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]),
        });
        result = { status: res.statusCode, headers: res.headers, text: await res.body.text() };
      } catch (e) {
        if (signal.aborted) throw e;
        error = e;
      } finally {
        permit?.release();
      }
      if (result && result.status >= 200 && result.status < 300) return result;
      const retryable = !result || result.status === 429 || result.status === 408 || result.status >= 500;
      const reason = result ? `HTTP ${result.status}` : scrub((error as Error).message || String(error), this.secrets);
      if (!retryable) throw new PermanentError(`${this.where}: ${reason}`);
      if (this.o.max_retries > 0 && attempt >= this.o.max_retries) {
        throw new RetriesExhaustedError(`${this.where}: ${reason} after ${attempt + 1} attempts`);
      }
      const retryAfter = result ? parseRetryAfter(result.headers['retry-after'], this.clock.now()) : undefined;
      let delay: number;
      if (retryAfter !== undefined) {
        delay = retryAfter;
        this.pausedUntil = Math.max(this.pausedUntil, this.clock.now() + retryAfter);
      } else {
        delay = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(attempt, 30));
      }
      hooks.onRetry?.(reason, delay);
      await sleep(delay, signal);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
