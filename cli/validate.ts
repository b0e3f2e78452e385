/**
 * `gw validate [PATH…] [-f PATH|-]…`: manifests checked offline, before a pipeline applies them, with the
 * checks the controller and `gw standalone` make (standalone/validate.ts). Files and directories are read
 * as `gw standalone --resources` reads them (lib/manifest-walk.ts, standalone/manifests.ts); `-` is stdin.
 * Everything is parsed on this one thread: a worker thread (as `gw standalone` starts for a large
 * directory) would load the parser's modules and warm its compiled code a second time, about a third
 * more CPU time for 10,000 files, which a pre-commit hook on a busy machine pays in wall time too.
 * One line per problem on stdout (`--output json`: one JSON object per line), a summary line on stderr;
 * exit 0 valid (warnings allowed), 1 errors or no document at all, 2 usage (docs/facade.md, "gw validate").
 */
import { loadManifestFile, loadManifestText, type LoadResult } from '../standalone/manifests.js';
import { formatProblem, printable, validateLoad } from '../standalone/validate.js';
import { isProblem, listManifests } from '../lib/manifest-walk.js';
import { readManifestFile, readManifestStream, type ReadOutcome } from '../lib/manifest-read.js';
const { statSync, realpathSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

export const ValidateExit = { OK: 0, INVALID: 1, USAGE: 2 } as const;

export interface ValidateFlags {
  filename?: string[];
  strict?: boolean;
  output: 'text' | 'json';
}

/** A command-line mistake: one line on stderr, exit 2. */
export class UsageError extends Error {}

/** A usage error's line: the path it names escaped as a problem line's names are (no raw ESC or newline). */
export const usageLine = (e: UsageError): string => `gw validate: ${printable(e.message)}\n`;

/** A directory's files read as `gw standalone` reads its directory, in walk order. */
function loadDirectory(path: string, seen: Set<string>): LoadResult {
  let listing;
  try {
    listing = listManifests(path);
  } catch (e) {
    throw new UsageError(`${path}: cannot list: ${(e as Error).message}`);
  }
  // a file already read (named before, or inside a directory named twice) is read once
  const real = realOf(path);
  const fresh = listing.entries.filter((e) => {
    if (isProblem(e)) return true;
    const key = join(real, e.rel);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  // named as given (`manifests/orders.yaml`), not relative to the directory
  const out: LoadResult = { resources: [], errors: [], files: [] };
  for (const entry of fresh) {
    const file = join(path, entry.rel);
    if (isProblem(entry)) {
      out.errors.push({ file, message: entry.problem });
      if (!entry.dir) out.files.push(file);
      continue;
    }
    const load = loadManifestFile(entry.rel, entry.path);
    if (load.gone) continue; // deleted since the listing
    for (const r of load.resources) out.resources.push({ ...r, file });
    for (const e of load.errors) out.errors.push({ ...e, file });
    for (const w of load.warnings ?? []) (out.warnings ??= []).push({ ...w, file });
    out.files.push(file);
  }
  return out;
}

/** The real path of p (symlinks and `./` resolved), or p itself when it cannot be resolved. */
function realOf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * The files and directories named, read in order into one result (`-`: stdin, once). A file is read
 * once however often it is named (`ok.yaml -f ok.yaml`, a directory and a file inside it): by real path.
 */
export function readInputs(paths: readonly string[], stdin: () => ReadOutcome): LoadResult {
  const into: LoadResult = { resources: [], errors: [], files: [] };
  let stdinRead = false;
  const seen = new Set<string>();
  for (const path of paths) {
    if (path === '-') {
      if (stdinRead) throw new UsageError('stdin (-) named twice');
      stdinRead = true;
      const read = stdin();
      if (read.ok) loadManifestText(read.text, '-', into);
      else into.errors.push({ file: '-', message: read.gone ? 'no such file or directory' : read.message });
      into.files.push('-');
      continue;
    }
    let dir: boolean;
    try {
      dir = statSync(path).isDirectory();
    } catch (e) {
      throw new UsageError(
        `${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or directory' : (e as Error).message}`,
      );
    }
    if (dir) {
      const listed = loadDirectory(path, seen);
      for (const r of listed.resources) into.resources.push(r);
      for (const e of listed.errors) into.errors.push(e);
      for (const w of listed.warnings ?? []) (into.warnings ??= []).push(w);
      for (const f of listed.files) into.files.push(f);
      continue;
    }
    const real = realOf(path);
    if (seen.has(real)) continue;
    seen.add(real);
    const read = readManifestFile(path);
    if (read.ok) loadManifestText(read.text, path, into);
    else into.errors.push({ file: path, message: read.gone ? 'no such file or directory' : read.message });
    into.files.push(path);
  }
  return into;
}

export async function runValidate(args: readonly string[], flags: ValidateFlags): Promise<number> {
  const paths = [...args, ...(flags.filename ?? [])];
  if (!paths.length) throw new UsageError('name the manifests to check: files, directories, or -f - for stdin');
  const load = readInputs(paths, () => readManifestStream(0));
  const problems = validateLoad(load, { strict: flags.strict === true });
  // a reader that stops early (`| head`) ends the output, not the process with an unhandled EPIPE
  process.stdout.on('error', () => {});
  const lines = problems.map((p) => (flags.output === 'json' ? JSON.stringify(p) : formatProblem(p)));
  if (lines.length) process.stdout.write(`${lines.join('\n')}\n`);
  const errors = problems.filter((p) => p.severity === 'error').length;
  const documents = load.resources.length + load.errors.filter((e) => e.index !== undefined).length;
  process.stderr.write(
    `gw validate: ${load.files.length} file(s), ${documents} document(s): ${errors} error(s), ${problems.length - errors} warning(s)\n`,
  );
  // nothing to check (an empty file, stdin or directory) is a pipeline mistake, not a valid input
  if (documents === 0 && errors === 0) {
    process.stderr.write('gw validate: no documents in the input: nothing was checked\n');
    return ValidateExit.INVALID;
  }
  return errors ? ValidateExit.INVALID : ValidateExit.OK;
}
