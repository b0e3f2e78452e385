/**
 * The import graph's layering (docs/architecture.md, "Folder map"), checked by `make lint`:
 * each top-level folder imports only the folders listed for it (type-only imports count too), and no
 * file imports itself back through others (no cycle). Run from the repository root: `node scripts/check-layers.ts`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

/** What each component may import besides itself. */
export const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  lib: [],
  crds: ['lib'],
  contract: ['lib', 'crds'],
  // the runtime stores behind the contract's interfaces (sessions, OAuth clients and tokens) and the OAuth grants
  stores: ['lib', 'crds', 'contract'],
  limiters: ['lib', 'crds', 'contract'],
  streams: ['lib', 'crds', 'contract'],
  compiler: ['lib', 'crds', 'contract'],
  // the data plane: no control-plane component
  sidecar: ['lib', 'crds', 'contract', 'stores', 'limiters', 'streams'],
  // the control plane: no sidecar/ internals
  controller: ['lib', 'crds', 'contract', 'stores', 'compiler'],
  facade: ['lib', 'crds', 'contract', 'stores', 'compiler', 'limiters'],
  webhook: ['lib', 'crds', 'contract'],
  // gateway, facade and resources in one process: composes both planes' parts, wired by cli/
  standalone: ['lib', 'crds', 'contract', 'stores', 'compiler', 'limiters', 'facade', 'streams'],
  cli: [
    'lib',
    'crds',
    'contract',
    'stores',
    'compiler',
    'limiters',
    'controller',
    'facade',
    'webhook',
    'standalone',
    'sidecar',
    'streams',
  ],
};

const SPECIFIER = /(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

/** Relative imports of one file, as repository paths of .ts files. */
export function importsOf(file: string, source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(SPECIFIER)) {
    out.push(normalize(join(dirname(file), m[1]!)).replace(/\.js$/, '.ts'));
  }
  return out;
}

/** Every layering break and every cycle of a set of files (path → source), one line each. */
export function layerViolations(files: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  const edges = new Map<string, string[]>();
  for (const [file, source] of files) {
    const from = file.split('/')[0]!;
    const targets = importsOf(file, source).filter((t) => files.has(t));
    edges.set(file, targets);
    for (const t of targets) {
      const to = t.split('/')[0]!;
      if (to !== from && !(ALLOWED[from] ?? []).includes(to))
        problems.push(`${file} imports ${t}: ${from}/ may not import ${to}/`);
    }
  }
  // Tarjan's strongly connected components: any component of more than one file is a cycle
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const cycle: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      cycle.push(w);
    } while (w !== v);
    if (cycle.length > 1 || (edges.get(v) ?? []).includes(v))
      problems.push(`import cycle: ${cycle.reverse().join(' → ')}`);
  };
  for (const f of edges.keys()) if (!index.has(f)) visit(f);
  return problems;
}

/** The product's .ts files under the repository root, keyed by repository path. */
export function productFiles(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.ts')) files.set(relative(root, p), readFileSync(p, 'utf8'));
    }
  };
  for (const top of Object.keys(ALLOWED)) walk(join(root, top));
  return files;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const problems = layerViolations(productFiles(process.cwd()));
  for (const p of problems) process.stderr.write(`check-layers: ${p}\n`);
  if (problems.length) process.exit(1);
  process.stdout.write('check-layers: the import graph follows docs/architecture.md\n');
}
