/**
 * For the chart tests: helm, kubeconform and hadolint from `bash test/servers/build-tools.sh`, and the
 * JSON schemas kubeconform validates against, prepared offline:
 *   - built-in kinds from the real kube-apiserver's /openapi/v2 (the harness's server), converted the
 *     way kubeconform's openapi2jsonschema does it: one standalone file per group/version/kind,
 *     $refs inlined, int-or-string as oneOf, objects closed (additionalProperties: false) = strict;
 *   - gw's kinds from the openAPIV3Schema of the chart's own crds/*.yaml.
 * Files are laid out as DIR/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json, the
 * template passed to kubeconform's -schema-location (core v1 → DIR/v1/pod_v1.json).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export function toolPath(name: 'helm' | 'kubeconform' | 'hadolint' | 'promtool'): string {
  const p = join(process.env.GW_TEST_CACHE ?? join(homedir(), '.cache', 'gw-test'), 'bin', name);
  if (!existsSync(p)) throw new Error(`${p} not found: run \`bash test/servers/build-tools.sh\` (make test-servers)`);
  return p;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(
  cmd: string,
  args: string[],
  opts: { input?: string; cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    const p = execFile(
      cmd,
      args,
      { cwd: opts.cwd, env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 1
          : 0;
        resolve({ code, stdout, stderr });
      },
    );
    // A command that does not read stdin may exit before the write lands (EPIPE): its result is what counts.
    p.stdin!.on('error', () => undefined);
    p.stdin!.end(opts.input ?? '');
  });
}

export const helm = (args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<RunResult> =>
  run(toolPath('helm'), args, {
    ...opts,
    env: {
      ...process.env,
      HELM_CACHE_HOME: '/tmp/gw-helm-cache',
      HELM_CONFIG_HOME: '/tmp/gw-helm-config',
      HELM_DATA_HOME: '/tmp/gw-helm-data',
    },
  });

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };
const isObject = (v: Json | undefined): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One standalone, strict schema: inline #/definitions refs (a recursive ref becomes {}), close objects. */
function standalone(node: Json, defs: JsonObject, seen: string[]): Json {
  if (Array.isArray(node)) return node.map((n) => standalone(n, defs, seen));
  if (!isObject(node)) return node;
  const ref = node.$ref;
  if (typeof ref === 'string') {
    const name = ref.replace(/^#\/definitions\//, '');
    if (seen.includes(name) || !defs[name]) return {};
    const { $ref: _r, ...rest } = node;
    const inlined = standalone(defs[name]!, defs, [...seen, name]);
    return isObject(inlined) ? { ...inlined, ...(standalone(rest, defs, seen) as JsonObject) } : inlined;
  }
  if (node.format === 'int-or-string' || node['x-kubernetes-int-or-string'] === true) {
    const { type: _t, format: _f, 'x-kubernetes-int-or-string': _x, ...rest } = node;
    return { ...rest, oneOf: [{ type: 'string' }, { type: 'integer' }] };
  }
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node))
    out[k] =
      k === 'properties' && isObject(v)
        ? Object.fromEntries(Object.entries(v).map(([pk, pv]) => [pk, standalone(pv, defs, seen)]))
        : standalone(v, defs, seen);
  if (
    isObject(out.properties) &&
    out.additionalProperties === undefined &&
    out['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    out.additionalProperties = false;
  }
  return out;
}

function fileFor(dir: string, group: string, version: string, kind: string): string {
  // kubeconform: Group = the part of apiVersion before "/" (core "v1" → "v1"); ResourceAPIVersion = after it.
  const g = group === '' ? version : group;
  mkdirSync(join(dir, g), { recursive: true });
  return join(dir, g, `${kind.toLowerCase()}_${version}.json`);
}

export const schemaLocation = (dir: string): string =>
  `${dir}/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json`;

function getJson(url: string, token: string): Promise<JsonObject> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        rejectUnauthorized: false,
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`${url}: HTTP ${res.statusCode}`));
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonObject);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${url}: timeout`)));
    req.on('error', reject);
    req.end();
  });
}

/** Schemas of every kind the API server serves (built-ins and any CRD installed), from /openapi/v2. */
export async function writeApiServerSchemas(server: string, token: string, dir: string): Promise<number> {
  const doc = await getJson(`${server}/openapi/v2`, token);
  const defs = doc.definitions;
  if (!isObject(defs)) throw new Error('/openapi/v2 has no definitions');
  let n = 0;
  for (const [name, def] of Object.entries(defs)) {
    if (!isObject(def)) continue;
    const gvks = def['x-kubernetes-group-version-kind'];
    if (!Array.isArray(gvks)) continue;
    const schema = standalone(def, defs, [name]);
    for (const gvk of gvks) {
      if (!isObject(gvk)) continue;
      const [group, version, kind] = [String(gvk.group ?? ''), String(gvk.version), String(gvk.kind)];
      writeFileSync(fileFor(dir, group, version, kind), JSON.stringify(schema));
      n++;
    }
  }
  return n;
}

/** Schemas of the kinds defined by CRD files (e.g. the chart's crds/), from their openAPIV3Schema. */
export function writeCrdSchemas(crdDir: string, dir: string): string[] {
  const written: string[] = [];
  for (const f of readdirSync(crdDir)
    .filter((x) => /\.ya?ml$/.test(x))
    .sort()) {
    for (const d of parseAllDocuments(readFileSync(join(crdDir, f), 'utf8'))) {
      const crd = d.toJS() as {
        kind?: string;
        spec?: {
          group: string;
          names: { kind: string };
          versions: { name: string; schema?: { openAPIV3Schema?: Json } }[];
        };
      };
      if (crd?.kind !== 'CustomResourceDefinition' || !crd.spec) continue;
      for (const v of crd.spec.versions) {
        const s = v.schema?.openAPIV3Schema;
        if (!isObject(s)) continue;
        const props = isObject(s.properties) ? s.properties : {};
        // apiVersion/kind/metadata are implicit in a CRD schema: add them so the closed object accepts them.
        const full: JsonObject = {
          ...s,
          properties: {
            apiVersion: { type: 'string' },
            kind: { type: 'string' },
            metadata: { type: 'object' },
            ...props,
          },
        };
        writeFileSync(
          fileFor(dir, crd.spec.group, v.name, crd.spec.names.kind),
          JSON.stringify(standalone(full, {}, [])),
        );
        written.push(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`);
      }
    }
  }
  return written;
}

export interface KubeconformSummary {
  valid: number;
  invalid: number;
  errors: number;
  skipped: number;
  messages: string[];
}

/** kubeconform -strict over YAML on stdin, with only the offline schemas in dir (no network location). */
export async function kubeconform(yamlText: string, dir: string): Promise<KubeconformSummary> {
  const r = await run(
    toolPath('kubeconform'),
    ['-strict', '-summary', '-output', 'json', '-schema-location', schemaLocation(dir), '-'],
    { input: yamlText },
  );
  let parsed: {
    resources?: { filename?: string; kind?: string; name?: string; status: string; msg?: string }[];
    summary?: { valid: number; invalid: number; errors: number; skipped: number };
  };
  try {
    parsed = JSON.parse(r.stdout) as typeof parsed;
  } catch {
    throw new Error(`kubeconform output is not JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
  const s = parsed.summary ?? { valid: 0, invalid: 0, errors: 0, skipped: 0 };
  const messages = (parsed.resources ?? [])
    .filter((x) => x.status !== 'statusValid')
    .map((x) => `${x.kind}/${x.name}: ${x.status} ${x.msg ?? ''}`);
  return { ...s, messages };
}
