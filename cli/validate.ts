/**
 * `gw validate [PATH…] [-f PATH|-]…`: manifests checked offline, before a pipeline applies them, with the
 * checks the controller and `gw standalone` make (standalone/validate.ts). Files and directories are read
 * as `gw standalone --resources` reads them (standalone/manifests.ts, lib/manifest-walk.ts); `-` is stdin.
 * One line per problem on stdout (`--output json`: one JSON object per line), a summary line on stderr;
 * exit 0 valid (warnings allowed), 1 errors, 2 usage (docs/facade.md, "gw validate").
 */
import { loadListing, loadManifestText, type LoadResult } from '../standalone/manifests.js';
import { formatProblem, validateLoad } from '../standalone/validate.js';
import { listManifests } from '../lib/manifest-walk.js';
import { readManifestFile } from '../lib/manifest-read.js';
const { statSync, readFileSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

export const ValidateExit = { OK: 0, INVALID: 1, USAGE: 2 } as const;

export interface ValidateFlags {
  filename?: string[];
  strict?: boolean;
  output: 'text' | 'json';
}

/** A command-line mistake: one line on stderr, exit 2. */
export class UsageError extends Error {}

/** The files and directories named, read in order into one result (`-`: stdin, once). */
export function readInputs(paths: readonly string[], stdin: () => string): LoadResult {
  const into: LoadResult = { resources: [], errors: [], files: [] };
  let stdinRead = false;
  for (const path of paths) {
    if (path === '-') {
      if (stdinRead) throw new UsageError('stdin (-) named twice');
      stdinRead = true;
      loadManifestText(stdin(), '-', into);
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
      let listed: LoadResult;
      try {
        listed = loadListing(listManifests(path));
      } catch (e) {
        throw new UsageError(`${path}: cannot list: ${(e as Error).message}`);
      }
      // named as given (`manifests/orders.yaml`), not relative to the directory
      for (const r of listed.resources) into.resources.push({ ...r, file: join(path, r.file) });
      for (const e of listed.errors) into.errors.push({ ...e, file: join(path, e.file) });
      for (const f of listed.files) into.files.push(join(path, f));
      continue;
    }
    const read = readManifestFile(path);
    if (read.ok) loadManifestText(read.text, path, into);
    else into.errors.push({ file: path, message: read.gone ? 'no such file or directory' : read.message });
    into.files.push(path);
  }
  return into;
}

export function runValidate(args: readonly string[], flags: ValidateFlags): number {
  const paths = [...args, ...(flags.filename ?? [])];
  if (!paths.length) throw new UsageError('name the manifests to check: files, directories, or -f - for stdin');
  const load = readInputs(paths, () => readFileSync(0, 'utf8'));
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
  return errors ? ValidateExit.INVALID : ValidateExit.OK;
}
