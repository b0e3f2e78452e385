/**
 * A thin JSON client over the API server (connection.ts gives the server, auth headers and one
 * keep-alive connection pool): plain REST paths, because the operator needs merge/JSON patches,
 * paging and watch streams, and none of client-node's generated code.
 */
import { Agent, errors, request, type Dispatcher } from '../http/undici.js';
import { KUBE_AGENT_OPTIONS, type KubeConnection } from './connection.js';

export class KubeApiError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly reason?: string,
  ) {
    super(message);
  }
}

export type PatchType = 'merge' | 'json';
const CONTENT_TYPE: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
};

export type Query = Record<string, string | number | boolean | undefined>;

export interface KubeApi {
  get(path: string, query?: Query): Promise<unknown>;
  post(path: string, body: unknown): Promise<unknown>;
  put(path: string, body: unknown): Promise<unknown>;
  patch(path: string, body: unknown, type: PatchType): Promise<unknown>;
  delete(path: string): Promise<unknown>;
  /** A watch: one parsed JSON event per line, until the server ends it or `signal` aborts. */
  watch(path: string, query: Query, onEvent: (event: unknown) => void, signal: AbortSignal): Promise<void>;
  server(): string;
}

function url(base: string, path: string, query?: Query): string {
  const u = new URL(base + path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') u.searchParams.set(k, String(v));
  return u.toString();
}

async function fail(method: string, path: string, status: number, text: string): Promise<never> {
  let st: { message?: string; reason?: string } | undefined;
  try {
    st = JSON.parse(text) as typeof st;
  } catch {
    st = undefined;
  }
  throw new KubeApiError(`${method} ${path}: ${status} ${st?.message ?? text.slice(0, 200)}`, status, st?.reason);
}

/**
 * A watch silent this long ends, as if the server had ended it, and the informer watches again from the
 * last resourceVersion (no relist). The API server sends bookmarks about once a minute, so a longer silence
 * is most often a connection that died without a FIN (a partition, a NAT entry gone). The stream timeout
 * also makes undici probe the HTTP/2 connection with a PING (timeout: the same 60 s) and replace it when
 * no answer comes, so a silently dead connection is left after ~2 min (docs/operator.md).
 */
export const WATCH_IDLE_MS = 60_000;

export function createKubeApi(conn: KubeConnection, timeoutMs = 30_000, watchIdleMs = WATCH_IDLE_MS): KubeApi {
  // a connection without its own dispatcher (plain http from client-node's kubeconfig) gets one keep-alive Agent
  let fallback: Dispatcher | undefined;
  const dispatcher = (): Dispatcher => conn.dispatcher ?? (fallback ??= new Agent(KUBE_AGENT_OPTIONS));
  async function call(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
    contentType = 'application/json',
    query?: Query,
  ): Promise<unknown> {
    const headers: Record<string, string> = { ...(await conn.headers()), accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = contentType;
    const res = await request(dispatcher(), url(conn.server, path, query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    if (res.statusCode >= 300) return fail(method, path, res.statusCode, text);
    return text ? (JSON.parse(text) as unknown) : undefined;
  }
  return {
    get: (path, query) => call('GET', path, undefined, undefined, query),
    post: (path, body) => call('POST', path, body),
    put: (path, body) => call('PUT', path, body),
    patch: (path, body, type) => call('PATCH', path, body, CONTENT_TYPE[type]),
    delete: (path) => call('DELETE', path),
    server: () => conn.server,
    async watch(path, query, onEvent, signal) {
      const headers = { ...(await conn.headers()), accept: 'application/json' };
      const res = await request(dispatcher(), url(conn.server, path, { ...query, watch: true }), {
        method: 'GET',
        headers,
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: watchIdleMs,
      });
      if (res.statusCode >= 300) return fail('WATCH', path, res.statusCode, await res.body.text());
      const lines = new LineEvents(onEvent);
      res.body.setEncoding('utf8');
      try {
        for await (const chunk of res.body as AsyncIterable<string>) lines.push(chunk);
      } catch (e) {
        // silent for watchIdleMs: ended like a watch the server ends (the caller watches again)
        if (e instanceof errors.BodyTimeoutError) return;
        throw e;
      }
    },
  };
}

/** A watch stream's newline-delimited JSON events, fed chunk by chunk; a line that does not parse is skipped. */
class LineEvents {
  private buf = '';
  constructor(private readonly onEvent: (event: unknown) => void) {}

  push(chunk: string): void {
    this.buf += chunk;
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl).trim();
      this.buf = this.buf.slice(nl + 1);
      if (!line) continue;
      let event: unknown;
      try {
        event = JSON.parse(line);
      } catch {
        continue;
      }
      this.onEvent(event);
    }
  }
}

export const codeOf = (e: unknown): number | undefined =>
  e instanceof KubeApiError
    ? e.code
    : e && typeof e === 'object'
      ? (e as { statusCode?: number }).statusCode
      : undefined;

/** REST path of a collection (namespace undefined = all namespaces) or of one object. */
export function resourcePath(
  r: { group: string; version: string; plural: string },
  namespace?: string,
  name?: string,
  sub?: string,
): string {
  const root = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const n = name ? `/${encodeURIComponent(name)}` : '';
  const s = name && sub ? `/${sub}` : '';
  return `${root}${ns}/${r.plural}${n}${s}`;
}
