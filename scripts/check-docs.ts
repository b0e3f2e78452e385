/**
 * What the repository's text may cite, checked by `make lint` (docs/contract.md, first paragraph):
 * - no file cites a document outside the repository (the contract is docs/contract.md, in the project's words);
 * - no doc or comment carries a work-log label (a numbered stage, a lettered run, a date): docs describe the
 *   system as it is, and how it got there is in git;
 * - every `docs/contract.md#section` cited names a section of docs/contract.md, and every `docs/NAME.md` exists.
 * Run from the repository root: `node scripts/check-docs.ts`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Citations of documents that a clone of the repository does not have. */
const OUTSIDE: readonly [RegExp, string][] = [
  [/\bSPEC\b/, 'cites the specification outside the repository: cite docs/contract.md#<section>'],
  [/\bseed\/|rate-limiting-gateway\.md/, 'cites the product spec outside the repository: cite docs/'],
  [/\/work\//, 'names a path outside the repository'],
];

/** Labels of a work log. */
const LABELS: readonly [RegExp, string][] = [
  [/\b[Ss]tops? \d+\b/, 'carries a numbered-stage label ("stop N")'],
  [/\b[Rr]uns? [A-Z]\d?\b/, 'carries a run label ("run X")'],
  [/\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b|\bsession of \d/, 'carries a dated run'],
  [/kept for honesty/, 'keeps a superseded figure'],
];

/** The files the rules read: text of the repository, not generated output, scratch copies or dependencies (.gitignore's folders). */
const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', '.gw-run', 'coverage']);
const TEXT = /\.(?:ts|js|lua|md|ya?ml|json|sh)$|^(?:Dockerfile|Makefile)$/;
/** This checker and its test spell out the patterns they look for. */
const SELF = new Set(['scripts/check-docs.ts', 'test/unit/check-docs.test.ts']);

/** The slug GitHub gives a Markdown heading (its anchor). */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown document's headings. */
export function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.+)$/.exec(line);
    if (m) out.add(slug(m[1]!));
  }
  return out;
}

/**
 * Every problem of a set of files (repository path → text), one line each (`path:line: what`).
 * `contractAnchors` are the sections of docs/contract.md; `exists` tells whether a repository path exists.
 */
export function docProblems(
  files: ReadonlyMap<string, string>,
  contractAnchors: ReadonlySet<string>,
  exists: (path: string) => boolean,
): string[] {
  const problems: string[] = [];
  for (const [path, text] of files) {
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      const at = `${path}:${i + 1}`;
      for (const [re, what] of [...OUTSIDE, ...LABELS]) if (re.test(line)) problems.push(`${at}: ${what}`);
      for (const m of line.matchAll(/docs\/contract\.md#([\w-]+)/g))
        if (!contractAnchors.has(m[1]!)) problems.push(`${at}: docs/contract.md has no section #${m[1]}`);
      for (const m of line.matchAll(/\bdocs\/([\w-]+\.md)\b/g))
        if (!exists(`docs/${m[1]}`)) problems.push(`${at}: docs/${m[1]} does not exist`);
    });
  }
  return problems;
}

/** The repository's text files, keyed by repository path. */
export function repositoryTexts(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      const rel = relative(root, p);
      if (statSync(p).isDirectory()) {
        if (!SKIP_DIRS.has(name)) walk(p);
      } else if (TEXT.test(name) && name !== 'package-lock.json' && !SELF.has(rel)) {
        files.set(rel, readFileSync(p, 'utf8'));
      }
    }
  };
  walk(root);
  return files;
}

/** The problems of the tree at `root`. */
export function treeProblems(root: string): string[] {
  const contract = join(root, 'docs', 'contract.md');
  const anchors = existsSync(contract) ? anchorsOf(readFileSync(contract, 'utf8')) : new Set<string>();
  return docProblems(repositoryTexts(root), anchors, (p) => existsSync(join(root, p)));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const problems = treeProblems(process.cwd());
  for (const p of problems) process.stderr.write(`check-docs: ${p}\n`);
  if (problems.length) process.exit(1);
  process.stdout.write('check-docs: no outside citation, no work-log label, every contract section cited exists\n');
}
