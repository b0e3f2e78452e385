/**
 * Lists the manifest files under a directory without trusting what is in it: a symbolic-link loop (to
 * a file or back to a directory), a FIFO, socket or device named `*.yaml`, a symbolic link to nothing or a
 * subdirectory that cannot be listed is one problem naming that path, and the rest of the directory is
 * still listed. Only the directory itself failing to list throws.
 */
import type { BigIntStats } from 'node:fs';
const { lstatSync, readdirSync, statSync } = process.getBuiltinModule('node:fs');
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

/**
 * Every manifest file under dir (recursive, sorted, hidden names skipped except the `.gw/` folder), each
 * directory read once. Throws only when dir itself cannot be listed.
 */
export function listManifests(dir: string): Listing {
  const entries: ListedEntry[] = [];
  const problem = (rel: string, text: string, dir = false): void => {
    entries.push(dir ? { rel, problem: text, dir } : { rel, problem: text });
  };
  const seen = new Map<string, string>(); // directory identity (dev:ino) → the path it was read at
  const rootStat = statSync(dir, { bigint: true });
  const walk = (d: string, rel: string, names: string[], ancestors: Set<string>): void => {
    for (const name of names.sort()) {
      if (name.startsWith('.') && name !== '.gw') continue;
      const path = join(d, name);
      const relPath = rel ? join(rel, name) : name;
      const manifestName = MANIFEST_EXT.test(name);
      let st: BigIntStats;
      try {
        st = statSync(path, { bigint: true });
      } catch (e) {
        const code = errCode(e);
        if (code === 'ELOOP') problem(relPath, 'skipped: symbolic link loop');
        else if (code === 'ENOENT') {
          // gone since the listing (nothing to say), or a symbolic link to nothing
          if (manifestName && isSymbolicLink(path)) problem(relPath, 'skipped: symbolic link to a missing file');
        } else if (manifestName) problem(relPath, `skipped: ${errText(e)}`);
        continue;
      }
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
        let inner: string[];
        try {
          inner = readdirSync(path);
        } catch (e) {
          if (errCode(e) !== 'ENOENT') problem(relPath, `directory skipped: ${errText(e)}`, true);
          continue;
        }
        seen.set(id, relPath);
        walk(path, relPath, inner, new Set([...ancestors, id]));
      } else if (manifestName) {
        if (st.isFile()) entries.push({ rel: relPath, path, mtimeNs: st.mtimeNs, size: st.size });
        else problem(relPath, `skipped: ${kindOf(st)}, not a regular file`);
      }
    }
  };
  const rootId = `${rootStat.dev}:${rootStat.ino}`;
  seen.set(rootId, '');
  walk(dir, '', readdirSync(dir), new Set([rootId]));
  return { entries };
}

/** A string that changes whenever a listed file or a problem changes (the directory poll compares it). */
export function listingSignature(l: Listing): string {
  return l.entries.map((e) => (isProblem(e) ? `${e.rel}!${e.problem}` : `${e.rel}:${e.mtimeNs}:${e.size}`)).join('|');
}
