/**
 * What the repository's text may cite, checked by `make lint` (docs/contract.md, first paragraph):
 * - no file cites a document outside the repository (the contract is docs/contract.md, in the project's words);
 * - no doc or comment carries a work-log label (a numbered stage, a lettered run, a date): docs describe the
 *   system as it is, and how it got there is in git;
 * - every `docs/contract.md#section` cited names a section of docs/contract.md, and every `docs/NAME.md` exists;
 * - docs/architecture.md's map is the tree: its folder map names every top-level folder and only those, and every
 *   file its tables name exists (with each `name` in the parentheses right after a file found in that file).
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
  [/\b[Ss]tages? \d+\b/, 'carries a numbered-stage label ("stage N")'],
  [/\b(?:build|commit|landing) (?=[0-9a-f]*\d)[0-9a-f]{7,12}\b/, 'names a build by its commit: history lives in git'],
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

/** A table cell's backticked token that names a file or a folder of the repository (not a URL path or a key). */
const PATH_TOKEN =
  /^(?:[\w.*{},-]+\/)*(?:[\w.*{},-]+\.(?:ts|js|lua|md|ya?ml|json|tpl|sh)|[\w*{},-]+\/|\*)$|^(?:Makefile|Dockerfile)$/;
const IDENTIFIER = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)?$/;

/** `a/{b,c}.ts` → `a/b.ts`, `a/c.ts` (one brace group, as the docs write them). */
function expandBraces(token: string): string[] {
  const m = /^(.*?)\{([^{}]*)\}(.*)$/.exec(token);
  return m ? m[2]!.split(',').flatMap((alt) => expandBraces(m[1]! + alt + m[3]!)) : [token];
}

/** A glob of one folder level (`*` within a name) as a RegExp. */
const globRe = (name: string): RegExp =>
  new RegExp(`^${name.replace(/[.+?^$()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);

/**
 * The problems of docs/architecture.md against the tree, one line each (`docs/architecture.md:line: what`):
 * the folder map's first column against `folders` (the repository's top-level folders), and in the folder map,
 * the request path and the "where each rule lives" table, every path a cell names. A name without a top-level
 * folder is read against the folders the row, the cell or the section's text named before it (`events.ts` after
 * `controller/status.ts`, the request path's files in `sidecar/proxy/`). `list(dir)` answers a folder's entries
 * (undefined: no such folder); `read(path)` a file's text.
 */
export function architectureProblems(
  doc: string,
  folders: readonly string[],
  list: (dir: string) => string[] | undefined,
  read: (path: string) => string | undefined,
): string[] {
  const problems: string[] = [];
  const top = new Set(folders);
  const exists = (path: string): string[] => {
    // the paths a token (globs allowed) names that exist
    let found = [''];
    const parts = path.replace(/\/$/, '').split('/');
    for (const part of parts) {
      const next: string[] = [];
      for (const dir of found) {
        const entries = list(dir === '' ? '.' : dir) ?? [];
        const re = globRe(part);
        for (const e of entries) if (re.test(e)) next.push(dir === '' ? e : `${dir}/${e}`);
      }
      found = next;
    }
    return path.endsWith('/') ? found.filter((f) => list(f) !== undefined) : found;
  };
  let section = '';
  let bases: string[] = [];
  const mapped = new Set<string>();
  doc.split('\n').forEach((line, i) => {
    const at = `docs/architecture.md:${i + 1}`;
    const heading = /^## (.+)$/.exec(line);
    if (heading) {
      section = heading[1]!;
      bases = [];
      return;
    }
    const checked = ['Folder map', 'The request path', 'Where each rule lives'].includes(section);
    if (!checked) return;
    const cells = line.startsWith('|') ? line.split(/(?<!\\)\|/).slice(1, -1) : [line];
    if (/^\|[-| ]+\|$/.test(line)) return;
    const rowBases: string[] = [];
    if (section === 'Folder map' && line.startsWith('|')) {
      const folder = /^\s*`([\w-]+)\/`\s*$/.exec(cells[0] ?? '');
      if (folder) {
        mapped.add(folder[1]!);
        rowBases.push(folder[1]!);
        if (!top.has(folder[1]!))
          problems.push(`${at}: the folder map names ${folder[1]}/, which the tree does not have`);
      }
    }
    // the folder map's first column is checked above, against the top-level folders
    for (const cell of section === 'Folder map' && line.startsWith('|') ? cells.slice(1) : cells) {
      const cellBases: string[] = [];
      // the parentheses after a token are looked at, not consumed: the tokens inside them are read too
      for (const m of cell.matchAll(/`([^`]+)`(?=(\s*\(([^()]*)\))?)/g)) {
        const token = m[1]!;
        if (!PATH_TOKEN.test(token) || token.startsWith('.')) continue;
        const direct = top.has(token.split('/')[0]!) || /^(?:Makefile|Dockerfile)$/.test(token);
        // `oauth/*` after no folder is a URL path's pattern, not a file glob
        if (!direct && token.endsWith('/*')) continue;
        const candidates = [...cellBases, ...rowBases, ...bases].map((b) => `${b}/`);
        let files: string[] = [];
        for (const alt of expandBraces(token)) {
          const tries = direct ? [''] : [...candidates, ''];
          const hit = tries.map((b) => exists(b + alt)).find((f) => f.length > 0);
          if (!hit) {
            problems.push(
              `${at}: ${alt} does not exist${direct ? '' : ` (read in ${[...candidates, './'].join(', ')})`}`,
            );
            continue;
          }
          files.push(...hit);
        }
        if (files.length) {
          // what the cell names next may be relative to this token's folder
          const first = files[0]!;
          const dir = list(first) !== undefined ? first.replace(/\/$/, '') : first.replace(/\/?[^/]*$/, '');
          if (dir && !cellBases.includes(dir)) cellBases.unshift(dir);
          if (direct && !line.startsWith('|') && dir && !bases.includes(dir)) bases.unshift(dir);
        }
        files = files.filter((f) => list(f) === undefined);
        const names = [...(m[3] ?? '').matchAll(/`([^`]+)`/g)].map((n) => n[1]!);
        if (files.length !== 1 || !names.length || !names.every((n) => IDENTIFIER.test(n))) continue;
        const text = read(files[0]!) ?? '';
        for (const n of names) {
          const word = n.split('.').pop()!;
          if (!new RegExp(`\\b${word.replace(/\$/g, '\\$')}\\b`).test(text))
            problems.push(`${at}: ${files[0]} has no ${n}`);
        }
      }
    }
  });
  for (const f of folders)
    if (!mapped.has(f)) problems.push(`docs/architecture.md: the folder map does not name ${f}/`);
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
  const folders = readdirSync(root).filter(
    (n) => !n.startsWith('.') && !SKIP_DIRS.has(n) && statSync(join(root, n)).isDirectory(),
  );
  const list = (dir: string): string[] | undefined => {
    const p = join(root, dir);
    return existsSync(p) && statSync(p).isDirectory() ? readdirSync(p) : undefined;
  };
  const read = (p: string): string | undefined =>
    existsSync(join(root, p)) ? readFileSync(join(root, p), 'utf8') : undefined;
  const architecture = join(root, 'docs', 'architecture.md');
  return [
    ...docProblems(repositoryTexts(root), anchors, (p) => existsSync(join(root, p))),
    ...(existsSync(architecture) ? architectureProblems(readFileSync(architecture, 'utf8'), folders, list, read) : []),
  ];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const problems = treeProblems(process.cwd());
  for (const p of problems) process.stderr.write(`check-docs: ${p}\n`);
  if (problems.length) process.exit(1);
  process.stdout.write(
    'check-docs: no outside citation, no work-log label, every contract section cited exists, the architecture map is the tree\n',
  );
}
