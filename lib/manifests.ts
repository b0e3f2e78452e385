/**
 * Reads YAML/JSON manifests (multi-document) into validated resources. Every error names the file,
 * the document index, the field path and the rule; a bad document never stops the good ones.
 */
import { parseAllDocuments } from 'yaml';
import { RESOURCE_SCHEMAS, type AnyResource } from '../crds/kinds.js';
import { firstLine, formatZodError } from './errors.js';
const { readdirSync, readFileSync, statSync } = process.getBuiltinModule('node:fs');
const { join, relative } = process.getBuiltinModule('node:path');

export interface LoadError {
  file: string;
  index: number;
  message: string;
}

export interface LoadResult {
  resources: { file: string; index: number; resource: AnyResource }[];
  errors: LoadError[];
}

const EXT = /\.(ya?ml|json)$/i;

/** Every manifest file under dir (recursive, sorted, hidden files skipped except the .gw/ folder). */
export function manifestFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      if (name.startsWith('.') && name !== '.gw') continue;
      const p = join(d, name);
      const st = statSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(p);
      else if (EXT.test(name)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** Validates one parsed document. */
export function validateDocument(doc: unknown): { ok: true; resource: AnyResource } | { ok: false; message: string } {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return { ok: false, message: '(root): must be an object' };
  const kind = (doc as { kind?: unknown }).kind;
  if (typeof kind !== 'string' || !(kind in RESOURCE_SCHEMAS)) {
    return { ok: false, message: `kind: must be one of ${Object.keys(RESOURCE_SCHEMAS).join(', ')} (got ${JSON.stringify(kind)})` };
  }
  const schema = RESOURCE_SCHEMAS[kind as keyof typeof RESOURCE_SCHEMAS];
  const parsed = schema.safeParse(doc);
  if (!parsed.success) return { ok: false, message: formatZodError(parsed.error) };
  return { ok: true, resource: parsed.data as AnyResource };
}

export function loadManifestText(text: string, file: string, into: LoadResult): void {
  let docs: unknown[];
  if (/\.json$/i.test(file)) {
    try {
      const v: unknown = JSON.parse(text);
      docs = Array.isArray(v) ? v : [v];
    } catch (e) {
      into.errors.push({ file, index: 0, message: `invalid JSON: ${(e as Error).message}` });
      return;
    }
  } else {
    docs = [];
    parseAllDocuments(text).forEach((d, i) => {
      if (d.errors.length) {
        into.errors.push({ file, index: i, message: `invalid YAML: ${firstLine(d.errors[0]!.message)}` });
        docs.push(undefined);
      } else docs.push(d.toJS());
    });
  }
  docs.forEach((doc, index) => {
    if (doc === undefined || doc === null) return; // empty document or already reported
    const v = validateDocument(doc);
    if (v.ok) into.resources.push({ file, index, resource: v.resource });
    else into.errors.push({ file, index, message: v.message });
  });
}

export function loadManifestDir(dir: string): LoadResult {
  const result: LoadResult = { resources: [], errors: [] };
  for (const file of manifestFiles(dir)) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      result.errors.push({ file: relative(dir, file), index: 0, message: `cannot read: ${(e as Error).message}` });
      continue;
    }
    loadManifestText(text, relative(dir, file) || file, result);
  }
  return result;
}

export function formatLoadError(e: LoadError): string {
  return `${e.file} (document ${e.index}): ${e.message}`;
}
