/** Longest listen-path prefix routing over the compiled APIs (already sorted longest first). */
import type { CompiledApi } from '../../contract/config.js';

export interface Route {
  api: CompiledApi;
  /** Path relative to the listen path, always starting with '/'. */
  relPath: string;
}

export function matchesListenPath(listen: string, path: string): boolean {
  if (path.startsWith(listen)) return true;
  // "/a/" also serves "/a"
  return listen.endsWith('/') && path === listen.slice(0, -1);
}

export function route(apis: readonly CompiledApi[], path: string): Route | undefined {
  for (const api of apis) {
    if (!matchesListenPath(api.listenPath, path)) continue;
    const rest = path.slice(Math.min(api.listenPath.length, path.length));
    // "/" + rest without one leading "/" (no regex, no copy when rest already starts with "/")
    const relPath = rest === '' ? '/' : rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
    return { api, relPath };
  }
  return undefined;
}
