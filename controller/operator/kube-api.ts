/**
 * A thin JSON client over the API server, authenticated exactly like @kubernetes/client-node's own
 * calls (RequestContext + its undici dispatcher, keep-alive). The generated clients hide the patch
 * content type and pagination; the operator needs both, so it speaks the REST paths directly.
 */
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { fetch } from 'undici';

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

export interface KubeApi {
  get(path: string, query?: Record<string, string | number | undefined>): Promise<unknown>;
  post(path: string, body: unknown): Promise<unknown>;
  put(path: string, body: unknown): Promise<unknown>;
  patch(path: string, body: unknown, type: PatchType): Promise<unknown>;
  delete(path: string): Promise<unknown>;
  server(): string;
}

export function createKubeApi(kc: KubeConfig, timeoutMs = 30_000): KubeApi {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const base = cluster.server.replace(/\/$/, '');
  // client-node builds a new undici Agent on every applySecurityAuthentication (no cache), so every
  // request would open (and keep) a TLS connection of its own: authenticate once a minute (tokens
  // may rotate), keep the first dispatcher and reuse it.
  let dispatcher: ReturnType<RequestContext['getDispatcher']>;
  let haveDispatcher = false;
  let auth: { headers: Record<string, string>; at: number } | undefined;
  async function authHeaders(url: string): Promise<Record<string, string>> {
    if (auth && Date.now() - auth.at < 60_000) return auth.headers;
    const ctx = new RequestContext(url, HttpMethod.GET);
    await kc.applySecurityAuthentication(ctx);
    if (!haveDispatcher) {
      dispatcher = ctx.getDispatcher();
      haveDispatcher = true;
    }
    auth = { headers: { ...(ctx.getHeaders() as Record<string, string>) }, at: Date.now() };
    return auth.headers;
  }
  async function call(method: HttpMethod, path: string, body?: unknown, contentType = 'application/json', query?: Record<string, string | number | undefined>): Promise<unknown> {
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const headers = { ...(await authHeaders(url.toString())) };
    headers['accept'] = 'application/json';
    if (body !== undefined) headers['content-type'] = contentType;
    const res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (res.status >= 300) {
      const st = parsed as { message?: string; reason?: string } | undefined;
      throw new KubeApiError(`${method} ${path}: ${res.status} ${st?.message ?? text.slice(0, 200)}`, res.status, st?.reason);
    }
    return parsed;
  }
  return {
    get: (path, query) => call(HttpMethod.GET, path, undefined, undefined, query),
    post: (path, body) => call(HttpMethod.POST, path, body),
    put: (path, body) => call(HttpMethod.PUT, path, body),
    patch: (path, body, type) => call(HttpMethod.PATCH, path, body, CONTENT_TYPE[type]),
    delete: (path) => call(HttpMethod.DELETE, path),
    server: () => base,
  };
}

export const codeOf = (e: unknown): number | undefined =>
  e instanceof KubeApiError ? e.code : e && typeof e === 'object' ? (e as { statusCode?: number }).statusCode : undefined;

/** REST path of a collection (namespace undefined = all namespaces) or of one object. */
export function resourcePath(r: { group: string; version: string; plural: string }, namespace?: string, name?: string, sub?: string): string {
  const root = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const n = name ? `/${encodeURIComponent(name)}` : '';
  const s = name && sub ? `/${sub}` : '';
  return `${root}${ns}/${r.plural}${n}${s}`;
}
