/**
 * Longest listen-path prefix routing (docs/contract.md#request-path) over the compiled APIs, through a character trie of
 * their listen paths: a request walks at most its own path's length, whatever the number of APIs.
 *
 * Semantics (as a scan of the APIs longest listen path first would give): a listen path matches a path
 * it is a string prefix of ("/a" serves "/a", "/a/x" and "/ab"), and one ending in "/" also serves the
 * path without that slash ("/a/" serves "/a"). Of several APIs on one listen path the first in the list
 * is served.
 *
 * A new API list (a config change) updates the last list's trie in place when the two differ by up to
 * half the list (a directory edit among 10,000 APIs touches one listen path, not the whole trie; a burst
 * of new files a few hundred); anything else builds a new trie.
 */
import type { CompiledApi } from '../../contract/config.js';

export interface Route {
  api: CompiledApi;
  /** Path relative to the listen path, always starting with '/'. */
  relPath: string;
}

interface Node {
  /** the API whose listen path ends here (the first in the list of those that do) */
  api: CompiledApi | undefined;
  /** how many APIs of the list have this listen path */
  count: number;
  /** (the root) some listen path is held by several APIs */
  shared?: boolean;
  /** next character code → node */
  next: Map<number, Node> | undefined;
}

function nodeOf(root: Node, listenPath: string): Node {
  let n = root;
  for (let i = 0; i < listenPath.length; i++) {
    const c = listenPath.charCodeAt(i);
    let child = n.next?.get(c);
    if (!child) {
      child = { api: undefined, count: 0, next: undefined };
      (n.next ??= new Map()).set(c, child);
    }
    n = child;
  }
  return n;
}

/** Tries built whole and updated in place (tests: an edit among many APIs updates, not rebuilds). */
export const trieStats = { built: 0, updated: 0 };

function buildTrie(apis: readonly CompiledApi[]): Node {
  trieStats.built++;
  const root: Node = { api: undefined, count: 0, next: undefined };
  for (const api of apis) {
    const n = nodeOf(root, api.listenPath);
    n.api ??= api;
    if (++n.count > 1) root.shared = true;
  }
  return root;
}

/**
 * At most this many APIs in or out (or half the last list, when more: a burst of new files adds hundreds
 * of APIs to thousands) for a trie to be updated rather than built again: an update walks the listen
 * paths of the APIs in and out, a build those of every API.
 */
const MIN_DELTA = 256;
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
/** A compiled config's order: longest listen path first, then by listen path. */
const order = (a: CompiledApi, b: CompiledApi): number =>
  b.listenPath.length - a.listenPath.length || cmp(a.listenPath, b.listenPath);

/**
 * APIs out of `prev` and into `next` (by identity) such that prev − out + in = next as multisets, found by
 * merging the two lists in a compiled config's order (any order gives a correct answer, only a longer
 * one); undefined beyond MIN_DELTA or half of `prev`, whichever is more.
 */
function delta(
  prev: readonly CompiledApi[],
  next: readonly CompiledApi[],
): { out: CompiledApi[]; in: CompiledApi[] } | undefined {
  const limit = Math.max(MIN_DELTA, prev.length >> 1);
  const out: CompiledApi[] = [];
  const inn: CompiledApi[] = [];
  let i = 0;
  let j = 0;
  while (i < prev.length || j < next.length) {
    const a = prev[i];
    const b = next[j];
    if (a === b) {
      i++;
      j++;
      continue;
    }
    const c = a === undefined ? 1 : b === undefined ? -1 : order(a, b);
    if (c <= 0) out.push(a!);
    if (c >= 0) inn.push(b!);
    if (c <= 0) i++;
    if (c >= 0) j++;
    if (out.length + inn.length > limit) return undefined;
  }
  return { out, in: inn };
}

/** `trie` (of `prev`) made the trie of `next`; false when that cannot be done in place. */
function updateTrie(trie: Node, d: { out: CompiledApi[]; in: CompiledApi[] }): boolean {
  // a listen path held by several APIs: which one is first needs the whole list
  if (trie.shared) return false;
  // every check first: the trie is changed only when the whole update applies
  const tally = (list: CompiledApi[]): Map<Node, number> => {
    const m = new Map<Node, number>();
    for (const a of list) {
      const n = nodeOf(trie, a.listenPath);
      m.set(n, (m.get(n) ?? 0) + 1);
    }
    return m;
  };
  const outs = tally(d.out);
  const ins = tally(d.in);
  for (const [n, k] of outs) if (n.count - k !== 0 || (ins.get(n) ?? 0) > 1) return false;
  for (const [n, k] of ins) if (k > 1 || n.count - (outs.get(n) ?? 0) !== 0) return false;
  for (const [n, k] of outs) {
    n.count -= k;
    n.api = undefined;
  }
  for (const a of d.in) {
    const n = nodeOf(trie, a.listenPath);
    n.count++;
    n.api = a;
  }
  return true;
}

/** One trie per API list: a config's list is immutable once compiled, and a new config brings a new list. */
const tries = new WeakMap<readonly CompiledApi[], Node>();
/** The list the last trie was made for (updated in place for the next list when they differ by little). */
let last: { apis: readonly CompiledApi[]; trie: Node } | undefined;

function trieOf(apis: readonly CompiledApi[]): Node {
  if (last !== undefined && last.apis === apis) return last.trie; // the current config: no WeakMap lookup
  let t = tries.get(apis);
  if (t) return t;
  const d = last && delta(last.apis, apis);
  if (last && d && updateTrie(last.trie, d)) {
    tries.delete(last.apis); // its trie is now the new list's
    t = last.trie;
    trieStats.updated++;
  } else t = buildTrie(apis);
  tries.set(apis, t);
  last = { apis, trie: t };
  return t;
}

/** Makes the trie of `apis` now (a config change), so that the first request after it does not. */
export function prepareRoutes(apis: readonly CompiledApi[]): void {
  trieOf(apis);
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
