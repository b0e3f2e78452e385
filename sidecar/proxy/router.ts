/**
 * Longest listen-path prefix routing (SPEC.md §3.1) over the compiled APIs, through a character trie of
 * their listen paths: a request walks at most its own path's length, whatever the number of APIs.
 *
 * Semantics (as a scan of the APIs longest listen path first would give): a listen path matches a path
 * it is a string prefix of ("/a" serves "/a", "/a/x" and "/ab"), and one ending in "/" also serves the
 * path without that slash ("/a/" serves "/a"). Of several APIs on one listen path the first in the list
 * is served.
 */
import type { CompiledApi } from '../../contract/config.js';

export interface Route {
  api: CompiledApi;
  /** Path relative to the listen path, always starting with '/'. */
  relPath: string;
}

interface Node {
  /** the API whose listen path ends here */
  api: CompiledApi | undefined;
  /** next character code → node */
  next: Map<number, Node> | undefined;
}

function buildTrie(apis: readonly CompiledApi[]): Node {
  const root: Node = { api: undefined, next: undefined };
  for (const api of apis) {
    let n = root;
    const lp = api.listenPath;
    for (let i = 0; i < lp.length; i++) {
      const c = lp.charCodeAt(i);
      let child = n.next?.get(c);
      if (!child) {
        child = { api: undefined, next: undefined };
        (n.next ??= new Map()).set(c, child);
      }
      n = child;
    }
    n.api ??= api;
  }
  return root;
}

/** One trie per API list: a config's list is immutable once compiled, and a new config brings a new list. */
const tries = new WeakMap<readonly CompiledApi[], Node>();

function trieOf(apis: readonly CompiledApi[]): Node {
  let t = tries.get(apis);
  if (!t) tries.set(apis, (t = buildTrie(apis)));
  return t;
}

function routed(api: CompiledApi, path: string): Route {
  const rest = path.slice(Math.min(api.listenPath.length, path.length));
  // "/" + rest without one leading "/" (no regex, no copy when rest already starts with "/")
  const relPath = rest === '' ? '/' : rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
  return { api, relPath };
}

export function route(apis: readonly CompiledApi[], path: string): Route | undefined {
  let n: Node | undefined = trieOf(apis);
  let best = n.api;
  let i = 0;
  for (; i < path.length; i++) {
    n = n.next?.get(path.charCodeAt(i));
    if (!n) break;
    if (n.api) best = n.api;
  }
  // the whole path walked: a listen path one "/" longer serves it too, and is the longest match
  if (n && i === path.length) {
    const slash = n.next?.get(47);
    if (slash?.api) best = slash.api;
  }
  return best ? routed(best, path) : undefined;
}
