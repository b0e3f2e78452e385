/**
 * Reads YAML/JSON manifests (multi-document) into validated resources. Every error names the file,
 * the document index, the field path and the rule; a bad document never stops the good ones.
 */
import { isMap, isScalar, isSeq, parseAllDocuments } from 'yaml';
import { CORE_SCHEMA, loadAll } from 'js-yaml';
import { RESOURCE_SCHEMAS, type AnyResource } from '../crds/kinds.js';
import { firstLine, formatZodError, zodIssues, type FieldIssue } from '../lib/errors.js';
import { isProblem, listManifests, type Listing } from '../lib/manifest-walk.js';
import { facadeJson, readManifestFile } from '../lib/manifest-read.js';
import { simpleYamlDocuments } from '../lib/simple-yaml.js';
import { jsonNestingPastAt } from '../lib/json-depth.js';
import { MAX_MANIFEST_DEPTH, MAX_YAML_DEPTH, yamlNestingPast } from '../lib/yaml-depth.js';
import { shapeValidator, type ShapeValidator } from '../lib/zod-shapes.js';

export interface LoadError {
  file: string;
  /** The document in the file; absent when the whole path was refused (unreadable, a loop, too large…). */
  index?: number;
  message: string;
  /** A document refused by its kind's schema: each issue (field path and rule), the first as the operator names it. */
  issues?: FieldIssue[];
  /** What the refused document says it is, where it says it (kind, metadata.namespace or `default`, metadata.name). */
  doc?: DocumentId;
  /** The path is a directory that could not be listed (its files' previous versions are kept). */
  dir?: boolean;
}

export interface LoadResult {
  resources: { file: string; index: number; resource: AnyResource }[];
  errors: LoadError[];
  /**
   * What was read, but perhaps not as its author meant: a YAML 1.1 boolean (`yes`, `off`…), read as
   * kubectl reads it. The document still loads (standalone logs it; `gw validate` prints a warning).
   */
  warnings?: LoadError[];
  /** Every manifest path of this read, in read order, refused ones included (files deleted meanwhile not). */
  files: string[];
}

/** Each kind's schema, validated per shape of document (lib/zod-shapes.ts): the schema's rules and errors. */
const VALIDATORS = Object.fromEntries(
  Object.entries(RESOURCE_SCHEMAS).map(([kind, schema]) => [kind, shapeValidator(schema)]),
) as { [K in keyof typeof RESOURCE_SCHEMAS]: ShapeValidator<AnyResource> };

export interface DocumentId {
  kind?: string;
  namespace?: string;
  name?: string;
  /** An ApiDefinition's api_id as apiIdOf finds it (OAS info.id, spec.api_id, the name), where it is a string. */
  apiId?: string;
}

/** An object's fields, or none for anything else. */
const field = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** The identity a document claims, as far as it states one in strings (a refused document's report names it). */
export function documentId(doc: unknown): DocumentId | undefined {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return undefined;
  const { kind, metadata } = doc as { kind?: unknown; metadata?: unknown };
  const meta = field(metadata);
  const id: DocumentId = {};
  if (typeof kind === 'string') id.kind = kind;
  if (typeof meta.name === 'string') {
    id.name = meta.name;
    id.namespace = typeof meta.namespace === 'string' ? meta.namespace : 'default';
    if (kind === 'ApiDefinition') {
      const spec = field((doc as { spec?: unknown }).spec);
      const info = field(field(field(spec.oas)['x-gw-api-gateway']).info);
      const apiId = [info.id, spec.api_id, meta.name].find((v) => v !== undefined);
      if (typeof apiId === 'string') id.apiId = apiId;
    }
  }
  return id;
}

/** Validates one parsed document. */
export function validateDocument(
  doc: unknown,
): { ok: true; resource: AnyResource } | { ok: false; message: string; issues: FieldIssue[] } {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    return {
      ok: false,
      message: '(root): must be an object',
      issues: [{ field: '(root)', message: 'must be an object' }],
    };
  const kind = (doc as { kind?: unknown }).kind;
  if (typeof kind !== 'string' || !(kind in RESOURCE_SCHEMAS)) {
    const message = `must be one of ${Object.keys(RESOURCE_SCHEMAS).join(', ')} (got ${JSON.stringify(kind)})`;
    return { ok: false, message: `kind: ${message}`, issues: [{ field: 'kind', message }] };
  }
  const parsed = VALIDATORS[kind as keyof typeof RESOURCE_SCHEMAS].safeParse(doc);
  if (!parsed.success) return { ok: false, message: formatZodError(parsed.error), issues: zodIssues(parsed.error) };
  return { ok: true, resource: parsed.data as AnyResource };
}

/**
 * A text in which an anchor or an alias may appear (`&name` or `*name` where a node starts): such a file
 * goes to the `yaml` parser, whose alias limit refuses alias bombs. Conservative: a false positive only
 * costs the slower parser.
 */
const MAY_HAVE_ANCHORS = /(^|[\s[{,:?-])[&*][^\s]/m;

/**
 * The documents of a YAML text by the plain-subset reader (lib/simple-yaml.ts: what js-yaml would read,
 * faster still) or js-yaml (several times faster than `yaml`), or undefined when the `yaml` parser must
 * decide: a possible anchor, or anything js-yaml refuses (its errors are not the ones reported).
 */
function fastDocuments(text: string): unknown[] | undefined {
  const simple = simpleYamlDocuments(text);
  if (simple) return simple;
  if (MAY_HAVE_ANCHORS.test(text)) return undefined;
  try {
    return loadAll(text, { schema: CORE_SCHEMA, maxAliases: 0 });
  } catch {
    return undefined;
  }
}

/**
 * The plain (unquoted) scalars YAML 1.1 reads as booleans and YAML 1.2 as strings. kubectl reads
 * manifests as YAML 1.1 (sigs.k8s.io/yaml, go-yaml v2): `active: yes` reaches the API server, and so the
 * controller, as `true`, and `name: no` as `false` (which the schema then refuses). gw's parsers read
 * YAML 1.2, so these are read as kubectl reads them, with a warning naming the field: standalone, `gw
 * validate` and the controller see the same values (docs/standalone.md, "Checking manifests before they
 * are applied").
 */
const YAML11_BOOLEAN = /^(?:y|Y|yes|Yes|YES|on|On|ON|n|N|no|No|NO|off|Off|OFF)$/;
/** A text where such a scalar may stand (conservative: a match in a comment or a quoted string only costs the `yaml` parser). */
const MAY_HAVE_YAML11_BOOLEAN = /(?:^|[\s[{,])(?:[yYnN]|yes|Yes|YES|on|On|ON|no|No|NO|off|Off|OFF)(?=$|[\s,\]}:])/m;

/** A YAML 1.1 boolean found: its field path and what it says. */
interface Yaml11Boolean {
  field: string;
  word: string;
  value: boolean;
}

/**
 * Every plain YAML 1.1 boolean of a document's node tree (values and keys), each turned into the boolean
 * kubectl reads. Recursion is bounded: the text's nesting was checked first (lib/yaml-depth.ts).
 */
function yaml11Booleans(node: unknown, path: (string | number)[], out: Yaml11Boolean[]): void {
  /** A plain YAML 1.1 boolean turned into its boolean and recorded at `field`; false for any other node. */
  const found = (n: unknown, field: string): boolean => {
    if (!isScalar(n) || n.type !== 'PLAIN' || n.tag || typeof n.value !== 'string' || !YAML11_BOOLEAN.test(n.value))
      return false;
    const word = n.value;
    const value = /^(?:y|yes|on)$/i.test(word);
    n.value = value;
    out.push({ field, word, value });
    return true;
  };
  const at = (p: (string | number)[]): string => p.join('.') || '(root)';
  if (isMap(node))
    for (const pair of node.items) {
      const keyOf = (): string => String(isScalar(pair.key) ? pair.key.value : pair.key);
      found(pair.key, `${at([...path, keyOf()])} (a key)`);
      path.push(keyOf()); // as the JSON kubectl sends names it (`true`)
      if (!found(pair.value, at(path))) yaml11Booleans(pair.value, path, out);
      path.pop();
    }
  else if (isSeq(node))
    node.items.forEach((item, i) => {
      path.push(i);
      if (!found(item, at(path))) yaml11Booleans(item, path, out);
      path.pop();
    });
  else if (path.length === 0) found(node, '(root)');
}

/**
 * The documents of a YAML text by the `yaml` parser; its errors go to `into` (undefined: none readable).
 * `yaml11`: YAML 1.1 booleans read as kubectl reads them, each a warning.
 */
const JOINED_HINT = " (two manifests without a '---' line between them? files concatenated with cat need one)";
/** Whether 1-based `line` of `text` is a manifest's top-level apiVersion or kind. */
function startsManifest(text: string, line: number | undefined): boolean {
  if (line === undefined) return false;
  return /^(apiVersion|kind):/.test(text.split('\n', line)[line - 1] ?? '');
}

function slowDocuments(text: string, file: string, into: LoadResult, yaml11 = false): unknown[] | undefined {
  const docs: unknown[] = [];
  let parsed;
  try {
    parsed = parseAllDocuments(text);
  } catch (e) {
    into.errors.push({ file, message: `invalid YAML: ${firstLine((e as Error).message)}` });
    return undefined;
  }
  parsed.forEach((d, i) => {
    if (d.errors.length) {
      const err = d.errors[0]!;
      // two manifests run together (files concatenated without a `---` between them) read as one mapping
      // whose keys repeat: say so, as the parser's message alone does not
      const joined = err.code === 'DUPLICATE_KEY' && startsManifest(text, err.linePos?.[0].line) ? JOINED_HINT : '';
      into.errors.push({ file, index: i, message: `invalid YAML: ${firstLine(err.message)}${joined}` });
      docs.push(undefined);
      return;
    }
    const booleans: Yaml11Boolean[] = [];
    if (yaml11) yaml11Booleans(d.contents, [], booleans);
    try {
      const js: unknown = d.toJS(); // throws on an alias bomb ("Excessive alias count…", the yaml default limit)
      docs.push(js);
      const id = booleans.length ? documentId(js) : undefined;
      for (const b of booleans)
        (into.warnings ??= []).push({
          file,
          index: i,
          message: `${b.field}: ${b.word} is read as ${b.value}, as kubectl reads YAML (1.1; YAML 1.2 reads the string "${b.word}"): write ${b.value} for the boolean, or quote it ("${b.word}") for the string`,
          issues: [{ field: b.field, message: `${b.word} is read as ${b.value} (a YAML 1.1 boolean)` }],
          ...(id ? { doc: id } : {}),
        });
    } catch (e) {
      into.errors.push({ file, index: i, message: `invalid YAML: ${firstLine((e as Error).message)}` });
      docs.push(undefined);
    }
  });
  return docs;
}

/** One file's documents into `into`: any failure is an error naming the file (and document), never a throw. */
export function loadManifestText(text: string, file: string, into: LoadResult): void {
  let docs: unknown[];
  if (/\.json$/i.test(file)) {
    const deep = jsonNestingPastAt(text, MAX_MANIFEST_DEPTH);
    if (deep >= 0) {
      into.errors.push({
        file,
        message: `invalid JSON: nested deeper than ${MAX_MANIFEST_DEPTH} levels (at offset ${deep}): not parsed`,
      });
      return;
    }
    try {
      const v: unknown = JSON.parse(text);
      docs = Array.isArray(v) ? v : [v];
    } catch (e) {
      into.errors.push({ file, index: 0, message: `invalid JSON: ${(e as Error).message}` });
      return;
    }
  } else {
    const json = facadeJson(text);
    if (json === undefined) {
      // refused before any parser recurses into it (lib/yaml-depth.ts)
      const deep = yamlNestingPast(text, MAX_YAML_DEPTH);
      if (deep) {
        into.errors.push({
          file,
          message: `invalid YAML: nested deeper than ${MAX_YAML_DEPTH} levels (document ${deep.document}, line ${deep.line}, column ${deep.column}): not parsed`,
        });
        return;
      }
    }
    const parsed =
      json !== undefined
        ? [json]
        : MAY_HAVE_YAML11_BOOLEAN.test(text)
          ? slowDocuments(text, file, into, true)
          : (fastDocuments(text) ?? slowDocuments(text, file, into));
    if (!parsed) return;
    docs = parsed;
  }
  docs.forEach((doc, index) => {
    if (doc === undefined || doc === null) return; // empty document or already reported
    let v: ReturnType<typeof validateDocument>;
    try {
      v = validateDocument(doc);
    } catch (e) {
      const message = `cannot validate: ${(e as Error).message}`; // e.g. nesting deeper than the stack
      v = { ok: false, message, issues: [{ field: '(root)', message }] };
    }
    if (v.ok) into.resources.push({ file, index, resource: v.resource });
    else {
      const id = documentId(doc);
      into.errors.push({ file, index, message: v.message, issues: v.issues, ...(id ? { doc: id } : {}) });
    }
  });
}

/** One file of a listing read and validated; `gone` when it was deleted since it was listed. */
export type FileLoad =
  { gone: true } | { gone?: false; resources: LoadResult['resources']; errors: LoadError[]; warnings?: LoadError[] };

export function loadManifestFile(rel: string, path: string): FileLoad {
  const read = readManifestFile(path);
  if (!read.ok) return read.gone ? { gone: true } : { resources: [], errors: [{ file: rel, message: read.message }] };
  const into: LoadResult = { resources: [], errors: [], files: [] };
  loadManifestText(read.text, rel, into);
  return { resources: into.resources, errors: into.errors, ...(into.warnings ? { warnings: into.warnings } : {}) };
}

/** Reads every file of a listing, in its order; the listing's problems become errors. */
export function loadListing(listing: Listing): LoadResult {
  const result: LoadResult = { resources: [], errors: [], files: [] };
  for (const entry of listing.entries) {
    if (isProblem(entry)) {
      result.errors.push({ file: entry.rel, message: entry.problem, ...(entry.dir ? { dir: true } : {}) });
      if (!entry.dir) result.files.push(entry.rel);
      continue;
    }
    const read = readManifestFile(entry.path);
    if (!read.ok) {
      if (read.gone) continue; // deleted since the listing: the next poll sees it gone
      result.errors.push({ file: entry.rel, message: read.message });
    } else loadManifestText(read.text, entry.rel, result);
    result.files.push(entry.rel);
  }
  return result;
}

/** Lists and reads dir. Throws only when dir itself cannot be listed. */
export function loadManifestDir(dir: string): LoadResult {
  return loadListing(listManifests(dir));
}

export function formatLoadError(e: LoadError): string {
  return e.index === undefined ? `${e.file}: ${e.message}` : `${e.file} (document ${e.index}): ${e.message}`;
}
