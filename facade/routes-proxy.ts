/**
 * POST /api/proxy: one request to a gateway origin on the caller's behalf. No open relay: only origins
 * in gateway_urls (exact scheme, host and port), no userinfo, http(s) only, redirects never followed,
 * and the caller's own Authorization (the facade token) is never forwarded: only body.headers are sent.
 */
import { z } from 'zod';
import { errors as undiciErrors, request, type Dispatcher } from '../lib/http/undici.js';
import { requireBearer } from './auth.js';
import { propagateTrace } from '../lib/trace/trace-context.js';
import type { FacadeContext, Route, RouteArgs } from './context.js';
import { hasControlChar, HttpError, readJson, sendJson, validate } from '../lib/http/http-util.js';
import { parseJson } from '../lib/json-depth.js';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Set by the facade's HTTP client itself, or meaningless across a hop. */
const DROPPED_HEADERS = new Set([
  'host',
  'content-length',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'expect',
  'proxy-authorization',
  'proxy-connection',
  'http2-settings',
]);
/** Largest proxied response body the facade buffers. */
export const MAX_PROXY_RESPONSE_BYTES = 10 * 1024 * 1024;

const HeaderValue = z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]);

export const ProxyBody = z.strictObject({
  method: z
    .string()
    .transform((m) => m.toUpperCase())
    .refine((m) => METHODS.has(m), `must be one of ${[...METHODS].join(', ')}`),
  url: z
    .string()
    .min(1)
    .max(8192)
    // A URL parser silently drops CR/LF/TAB; refuse them instead of guessing what was meant.
    .refine((u) => !hasControlChar(u), 'must not contain control characters'),
  headers: z.record(z.string().regex(HEADER_NAME, 'must be a valid header name'), HeaderValue).optional(),
  body: z.unknown().optional(),
});

/** scheme://host[:port], as URL.origin normalises it (default ports dropped, host lower-cased). */
export function normalizeOrigin(value: string): string | undefined {
  try {
    const u = new URL(value);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    return u.origin;
  } catch {
    return undefined;
  }
}

/** Parses url and refuses anything that is not exactly an allowed gateway origin. */
export function checkProxyUrl(raw: string, allowed: ReadonlySet<string>): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new HttpError(400, 'url: must be an absolute URL with scheme, host and path');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new HttpError(400, `url: scheme ${u.protocol} not allowed (http or https only)`);
  if (u.username || u.password) throw new HttpError(400, 'url: credentials in the URL are not allowed');
  if (!allowed.has(u.origin)) throw new HttpError(400, `url: origin ${u.origin} is not a gateway URL (gateway_urls)`);
  return u;
}

function outgoingHeaders(
  given: Record<string, z.infer<typeof HeaderValue>> | undefined,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(given ?? {})) {
    const name = k.toLowerCase();
    if (DROPPED_HEADERS.has(name)) continue;
    const value = Array.isArray(v) ? v : String(v);
    for (const s of Array.isArray(value) ? value : [value]) {
      if (/[\r\n\0]/.test(s)) throw new HttpError(400, `headers.${k}: must not contain CR, LF or NUL`);
    }
    out[name] = value;
  }
  return out;
}

function encodeBody(body: unknown, headers: Record<string, string | string[]>): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return body;
  if (!headers['content-type']) headers['content-type'] = 'application/json';
  return JSON.stringify(body);
}

function isJson(contentType: string | string[] | undefined): boolean {
  const ct = Array.isArray(contentType) ? contentType[0] : contentType;
  return !!ct && /^application\/([a-z0-9.+-]*\+)?json\b/i.test(ct.trim());
}

async function send(
  ctx: FacadeContext,
  url: URL,
  method: string,
  headers: Record<string, string | string[]>,
  body: string | undefined,
) {
  const timeoutMs = ctx.options.proxy_timeout * 1000;
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, timeoutMs);
  try {
    // The dispatcher has no redirect interceptor: a 3xx is answered as it is, never followed.
    const r = await request(ctx.dispatcher, url, {
      method: method as Dispatcher.HttpMethod,
      headers,
      body,
      signal: ac.signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of r.body) {
      const b = chunk as Buffer;
      size += b.length;
      if (size > MAX_PROXY_RESPONSE_BYTES) {
        r.body.destroy();
        throw new HttpError(502, `gateway response larger than ${MAX_PROXY_RESPONSE_BYTES} bytes`);
      }
      chunks.push(b);
    }
    return { status: r.statusCode, headers: r.headers, text: Buffer.concat(chunks).toString('utf8') };
  } catch (e) {
    if (e instanceof HttpError) throw e;
    if (timedOut) throw new HttpError(504, `gateway did not answer within ${ctx.options.proxy_timeout} s`);
    const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    const code = err.code ?? err.cause?.code ?? '';
    if (e instanceof undiciErrors.InvalidArgumentError)
      throw new HttpError(400, `invalid proxied request: ${err.message}`);
    ctx.logger.warn({ origin: url.origin, code, err: err.message }, 'proxy: gateway unreachable');
    throw new HttpError(502, `gateway unreachable${code ? ` (${code})` : ''}`);
  } finally {
    clearTimeout(timer);
  }
}

async function proxy(args: RouteArgs): Promise<void> {
  const { ctx, res } = args;
  requireBearer(args.req, ctx.options.access_tokens ?? []);
  const b = validate(ProxyBody, await readJson(args.req));
  const url = checkProxyUrl(b.url, ctx.gatewayOrigins);
  const headers = outgoingHeaders(b.headers);
  // W3C trace context: the proxied request continues the trace of its own headers, else the caller's
  propagateTrace(headers, args.req.headers);
  const body = encodeBody(b.body, headers);
  const r = await send(ctx, url, b.method, headers, body);
  let parsed: unknown = r.text;
  if (isJson(r.headers['content-type']) && r.text !== '') {
    try {
      // nested past MAX_JSON_DEPTH: kept as text (lib/json-depth.ts)
      parsed = parseJson(r.text);
    } catch {
      parsed = r.text;
    }
  }
  const outHeaders: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(r.headers)) if (v !== undefined) outHeaders[k] = v;
  ctx.logger.info({ method: b.method, origin: url.origin, status: r.status }, 'proxied');
  sendJson(res, 200, { status_code: r.status, headers: outHeaders, body: parsed });
}

export const proxyRoutes: Route[] = [{ template: '/api/proxy', methods: { POST: proxy } }];
