/** One request to the facade with undici; every failure becomes a ClientError with its exit code. */
import { Agent, dispatchRequest, type Dispatcher } from '../../lib/http/undici.js';

let agent: Dispatcher | undefined;
import { z } from 'zod';
import { isControlChar } from '../../lib/http/http-util.js';
import type { Connection } from './connection.js';
import { ClientError, Exit, exitForStatus } from './exit-codes.js';
import { NO_SUCH_ROUTE } from '../../lib/http/http-util.js';

export type Credential = 'bearer' | 'secret';

export interface FacadeCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path below the base URL, segments already encoded. */
  path: string;
  credential: Credential;
  body?: Record<string, unknown>;
  /** POST /api/proxy: 502/504 mean the gateway, not the facade. */
  proxy?: boolean;
}

const ErrorBody = z.object({ status: z.literal('error'), message: z.string() });

/** One line, whatever the server put in the message. */
export function oneLine(s: string): string {
  let out = '';
  for (const ch of s.replace(/[\r\n\t]+/g, ' ')) {
    if (!isControlChar(ch)) out += ch;
  }
  return out.slice(0, 2000);
}

function credentialHeaders(conn: Connection, credential: Credential): Record<string, string> {
  if (credential === 'bearer') {
    if (!conn.token) throw new ClientError(Exit.AUTH, 'no access token: set GW_ACCESS_TOKEN or --token');
    return { authorization: `Bearer ${conn.token}` };
  }
  if (!conn.secret) throw new ClientError(Exit.AUTH, 'no secret: set GW_SECRET or --secret');
  return { 'x-gw-authorization': conn.secret };
}

/**
 * Encodes one path segment: a key id may hold any character, "/" included; dots are encoded too so
 * that "." and ".." reach the facade as a key id (which refuses them) instead of being resolved away.
 */
export function seg(value: string): string {
  return encodeURIComponent(value).replace(/\./g, '%2E');
}

export async function callFacade(conn: Connection, call: FacadeCall): Promise<unknown> {
  const headers: Record<string, string> = { accept: 'application/json', ...credentialHeaders(conn, call.credential) };
  let body: string | undefined;
  if (call.body !== undefined) {
    body = JSON.stringify(call.body);
    headers['content-type'] = 'application/json';
  }
  let status: number;
  let text: string;
  let retryAfter: string | string[] | undefined;
  try {
    // Dispatcher.request sends `path` as given: a key id "%2E%2E" is not resolved away as a URL
    // parser would. undici follows no redirect without an interceptor.
    const r = await dispatchRequest((agent ??= new Agent()), {
      origin: conn.origin,
      path: `${conn.basePath}${call.path}`,
      method: call.method,
      headers,
      body,
      signal: AbortSignal.timeout(conn.timeoutMs),
    });
    status = r.statusCode;
    retryAfter = r.headers['retry-after'];
    text = await r.body.text();
  } catch (e) {
    const err = e as Error & { code?: string; cause?: { code?: string } };
    if (err.name === 'TimeoutError' || err.name === 'AbortError') {
      throw new ClientError(Exit.UNAVAILABLE, `facade ${conn.base} did not answer within ${conn.timeoutMs / 1000} s`);
    }
    const code = err.code ?? err.cause?.code;
    throw new ClientError(
      Exit.UNAVAILABLE,
      `facade ${conn.base} unreachable${code ? ` (${code})` : ''}: ${oneLine(err.message)}`,
    );
  }

  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : (JSON.parse(text) as unknown);
  } catch {
    parsed = undefined;
  }
  const code = exitForStatus(status, call.proxy);
  if (code === Exit.OK) {
    if (parsed === undefined)
      throw new ClientError(
        Exit.UNAVAILABLE,
        `facade answered HTTP ${status} without a JSON body (is --url the facade?)`,
      );
    return parsed;
  }
  const e = ErrorBody.safeParse(parsed);
  const message = e.success ? e.data.message : text.trim() ? `non-JSON answer: ${text.trim()}` : 'empty answer';
  // the facade has no such route: --url (its base path) is wrong, not the key or client — exit 2 would
  // tell a pipeline "already deleted"
  if (status === 404 && message === NO_SUCH_ROUTE)
    throw new ClientError(
      Exit.UNAVAILABLE,
      `HTTP 404: ${message} under ${conn.base} (is --url the facade's base URL?)`,
    );
  const retry = code === Exit.RATE_LIMITED && retryAfter ? ` (retry after ${String(retryAfter)} s)` : '';
  throw new ClientError(code, `HTTP ${status}: ${oneLine(message)}${retry}`);
}
