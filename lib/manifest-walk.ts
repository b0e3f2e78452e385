/**
 * Lists the manifest files under a directory without trusting what is in it: a symbolic-link loop (to
 * a file or back to a directory), a FIFO, socket or device named `*.yaml`, a symbolic link to nothing or a
 * subdirectory that cannot be listed is one problem naming that path, and the rest of the directory is
 * still listed. Only the directory itself failing to list throws.
 */
import type { BigIntStats } from 'node:fs';
const { lstatSync, readdirSync, statSync } = process.getBuiltinModule('node:fs');
const { lstat, readdir, stat } = process.getBuiltinModule('node:fs/promises');
const { join } = process.getBuiltinModule('node:path');

/** The names read as manifests. */
export const MANIFEST_EXT = /\.(ya?ml|json)$/i;

export interface ListedFile {
  /** The path relative to the directory, as every message names it. */
  rel: string;
  /** The path to open (the directory joined with `rel`). */
  path: string;
  /** Modification time (ns) and size when listed: a change of either is a change of the directory. */
  mtimeNs: bigint;
  size: bigint;
  ino: bigint;
  /** Status change time (ns): a chmod changes it, not the modification time. */
  ctimeNs: bigint;
}

export interface PathProblem {
  rel: string;
  problem: string;
  /** The path is a directory: files loaded from under it before are kept, not dropped. */
  dir?: boolean;
}

export type ListedEntry = ListedFile | PathProblem;

/** Files and problems in the order they were met (sorted names, depth first: the read order). */
export interface Listing {
  entries: ListedEntry[];
  /** The directories read (relative; '' is the directory itself), each once: what a watcher watches. */
  dirs?: string[];
}

export const isProblem = (e: ListedEntry): e is PathProblem => 'problem' in e;

const errCode = (e: unknown): string | undefined => (e as NodeJS.ErrnoException).code;
const errText = (e: unknown): string =>
  `${errCode(e) ?? 'error'}: ${(e as Error).message.replace(/^\w+: /, '').replace(/, \w+ '.*'$/, '')}`;

function isSymbolicLink(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink() ?? false;
  } catch {
    return false;
  }
}

function kindOf(st: BigIntStats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

/** A file-system call the walk needs: the sync driver makes it at once, the async one off the event loop. */
type FsOp = { op: 'stat'; path: string } | { op: 'readdir'; path: string } | { op: 'isLink'; path: string };
type FsResult = { ok: true; value: BigIntStats | string[] | boolean } | { ok: false; error: unknown };

/**
 * The walk as a generator of file-system calls, so one algorithm serves listManifests (sync) and
 * listManifestsAsync (each call in libuv's pool: a directory of any size never holds the event loop).
 */
function* walkOps(dir: string): Generator<FsOp, Listing, FsResult> {
  const entries: ListedEntry[] = [];
  const problem = (rel: string, text: string, dir = false): void => {
    entries.push(dir ? { rel, problem: text, dir } : { rel, problem: text });
  };
  const seen = new Map<string, string>(); // directory identity (dev:ino) → the path it was read at
  const dirs: string[] = [''];
  const need = function* <T>(op: FsOp): Generator<FsOp, T, FsResult> {
    const r = yield op;
    if (!r.ok) throw r.error;
    return r.value as T;
  };
  const rootStat = yield* need<BigIntStats>({ op: 'stat', path: dir });
  const walk = function* (
    d: string,
    rel: string,
    names: string[],
    ancestors: Set<string>,
  ): Generator<FsOp, void, FsResult> {
    for (const name of names.sort()) {
      if (name.startsWith('.') && name !== '.gw') continue;
      const path = join(d, name);
      const relPath = rel ? join(rel, name) : name;
      const manifestName = MANIFEST_EXT.test(name);
      const stat = yield { op: 'stat', path };
      if (!stat.ok) {
        const e = stat.error;
        const code = errCode(e);
        if (code === 'ELOOP') problem(relPath, 'skipped: symbolic link loop');
        else if (code === 'ENOENT') {
          // gone since the listing (nothing to say), a symbolic link to nothing, or a name that is not
          // UTF-8: the listing decodes it with U+FFFD, a path no file has (it would be skipped unseen)
          if (name.includes('\uFFFD')) problem(relPath, 'skipped: its name is not valid UTF-8 (rename it)');
          else if (manifestName) {
            const link = yield { op: 'isLink', path };
            if (link.ok && link.value) problem(relPath, 'skipped: symbolic link to a missing file');
          }
        } else if (manifestName) problem(relPath, `skipped: ${errText(e)}`);
        continue;
      }
      const st = stat.value as BigIntStats;
      if (st.isDirectory()) {
        const id = `${st.dev}:${st.ino}`;
        const first = seen.get(id);
        if (first !== undefined) {
          const where = first || '.';
          problem(
            relPath,
            ancestors.has(id)
              ? `skipped: symbolic link loop (leads back to ${where})`
              : `skipped: the same directory as ${where}, read there`,
          );
          continue;
        }
        const inner = yield { op: 'readdir', path };
        if (!inner.ok) {
          if (errCode(inner.error) !== 'ENOENT') problem(relPath, `directory skipped: ${errText(inner.error)}`, true);
          continue;
        }
        seen.set(id, relPath);
        dirs.push(relPath);
        yield* walk(path, relPath, inner.value as string[], new Set([...ancestors, id]));
      } else if (manifestName) {
        if (st.isFile())
          entries.push({ rel: relPath, path, mtimeNs: st.mtimeNs, size: st.size, ino: st.ino, ctimeNs: st.ctimeNs });
        else problem(relPath, `skipped: ${kindOf(st)}, not a regular file`);
      }
    }
  };
  const rootId = `${rootStat.dev}:${rootStat.ino}`;
  seen.set(rootId, '');
  yield* walk(dir, '', yield* need<string[]>({ op: 'readdir', path: dir }), new Set([rootId]));
  return { entries, dirs };
}

function syncOp(op: FsOp): FsResult {
  try {
    if (op.op === 'stat') return { ok: true, value: statSync(op.path, { bigint: true }) };
    if (op.op === 'readdir') return { ok: true, value: readdirSync(op.path) };
    return { ok: true, value: isSymbolicLink(op.path) };
  } catch (error) {
    return { ok: false, error };
  }
}

async function asyncOp(op: FsOp): Promise<FsResult> {
  try {
    if (op.op === 'stat') return { ok: true, value: await stat(op.path, { bigint: true }) };
    if (op.op === 'readdir') return { ok: true, value: await readdir(op.path) };
    return { ok: true, value: (await lstat(op.path).catch(() => undefined))?.isSymbolicLink() ?? false };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * Every manifest file under dir (recursive, sorted, hidden names skipped except the `.gw/` folder), each
 * directory read once. Throws only when dir itself cannot be listed.
 */
export function listManifests(dir: string): Listing {
  const g = walkOps(dir);
  let step = g.next();
  while (!step.done) step = g.next(syncOp(step.value));
  return step.value;
}

/** listManifests with every file-system call made off the event loop. */
export async function listManifestsAsync(dir: string): Promise<Listing> {
  const g = walkOps(dir);
  let step = g.next();
  while (!step.done) step = g.next(await asyncOp(step.value));
  return step.value;
}

/** The identity of a listed file's content: an edit, a replacement (rename over it), a chmod changes it. */
export const fileSignature = (f: ListedFile): string => `${f.mtimeNs}:${f.ctimeNs}:${f.size}:${f.ino}`;

/** A string that changes whenever a listed file or a problem changes (the directory poll compares it). */
export function listingSignature(l: Listing): string {
  return l.entries.map((e) => (isProblem(e) ? `${e.rel}!${e.problem}` : `${e.rel}:${fileSignature(e)}`)).join('|');
}
