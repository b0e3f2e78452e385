/** Shared by the facade tests: a facade over a temp resources dir, real HTTP calls, an OpenAPI check. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Agent, request } from 'undici';
import { DirSource } from '../../../standalone/dir-source.js';
import { DirBackend } from '../../../facade/backend-dir.js';
import type { QuotaState, ResourceBackend } from '../../../facade/backend.js';
import { facadeOpenApi } from '../../../facade/openapi.js';
import { createFacadeServer, type FacadeServerOptions } from '../../../facade/server.js';
import { GatewayOptions, type GatewayOptionsT } from '../../../lib/options.js';

export const TOKEN = 'facade-test-token-0123456789';
export const SECRET = 'facade-test-secret-0123456789';

export interface Recorded {
  method: string;
  path: string;
  status: number;
  body: unknown;
  /** The request body sent (parsed), when JSON. */
  request?: unknown;
  retryAfter?: string;
}

export interface Facade {
  url: string;
  dir: string;
  server: Server;
  source: DirSource;
  backend: DirBackend;
  logs: string[];
  quotas: Map<string, QuotaState>;
  recorded: Recorded[];
  call(
    method: string,
    path: string,
    init?: CallInit,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: unknown; text: string }>;
  close(): Promise<void>;
}

export interface CallInit {
  headers?: Record<string, string>;
  /** JSON-encoded unless a string. */
  body?: unknown;
  /** No credential header added automatically. */
  noAuth?: boolean;
}

export const API_YAML = `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: petstore}
spec:
  api_id: pets
  proxy: {listen_path: /pets/}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: gold}
spec: {rate: 100, per: 60}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: dormant}
spec: {rate: 100, per: 60, active: false}
`;

export async function startFacade(
  extra: Partial<Omit<FacadeServerOptions, 'backend' | 'logger' | 'options'>> & {
    options?: Partial<GatewayOptionsT>;
    /** Wraps the directory backend (e.g. to make writes fail like a cluster backend would). */
    wrapBackend?: (b: DirBackend) => ResourceBackend;
  } = {},
): Promise<Facade> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-facade-'));
  writeFileSync(join(dir, 'api.yaml'), API_YAML);
  const logs: string[] = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        logs.push(chunk.toString());
        cb();
      },
    }),
  );
  const source = new DirSource(dir, logger);
  await source.load();
  const quotas = new Map<string, QuotaState>();
  const backend = new DirBackend({
    dir,
    snapshot: () => source.current(),
    quota: async (h) => quotas.get(h),
    onWrite: (files) => source.changed(files),
  });
  const options = GatewayOptions.parse({ secret: SECRET, access_tokens: ['other-token', TOKEN], ...extra.options });
  const { options: _o, wrapBackend, ...rest } = extra;
  const server = createFacadeServer({
    backend: wrapBackend ? wrapBackend(backend) : backend,
    logger,
    options,
    gatewayOrigins: ['http://127.0.0.1:1'],
    ...rest,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const recorded: Recorded[] = [];
  // idle connections dropped after 1 s, well before the server's 5 s keep-alive: on a loaded machine a
  // late client timer could otherwise send a request (a 440 KB body) into a socket the server just closed
  const dispatcher = new Agent({ keepAliveTimeout: 1000, keepAliveMaxTimeout: 1000 });
  const f: Facade = {
    url,
    dir,
    server,
    source,
    backend,
    logs,
    quotas,
    recorded,
    async call(method, path, init = {}) {
      const headers: Record<string, string> = {};
      if (!init.noAuth) {
        if (path.startsWith('/api/')) headers.authorization = `Bearer ${TOKEN}`;
        if (path.startsWith('/gw/')) headers['x-gw-authorization'] = SECRET;
      }
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        headers['content-type'] = 'application/json';
      }
      Object.assign(headers, init.headers);
      const r = await request(url + path, { method: method as 'GET', headers, body, dispatcher });
      const text = await r.body.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text) as unknown;
      } catch {
        // not JSON
      }
      const rec: Recorded = { method, path: path.split('?')[0]!, status: r.statusCode, body: parsed };
      if (init.body !== undefined) rec.request = typeof init.body === 'string' ? tryJson(init.body) : init.body;
      const ra = r.headers['retry-after'];
      if (typeof ra === 'string') rec.retryAfter = ra;
      recorded.push(rec);
      return { status: r.statusCode, headers: r.headers, body: parsed, text };
    },
    async close() {
      source.stop();
      await new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await dispatcher.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return f;
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

// ---- OpenAPI conformance (status documented; top-level fields documented and required ones present) ----

type Json = { [k: string]: unknown };

function resolve(schema: Json): Json {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const name = ref.replace('#/components/schemas/', '');
  return ((facadeOpenApi.components as Json).schemas as Json)[name] as Json;
}

function templateFor(path: string): string | undefined {
  for (const t of Object.keys(facadeOpenApi.paths as Json)) {
    const re = new RegExp(`^${t.replace(/\{\w+\}/g, '[^/]+')}/?$`);
    if (re.test(path)) return t;
  }
  return undefined;
}

const TYPE_OF: Record<string, (v: unknown) => boolean> = {
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number' && Number.isFinite(v),
  integer: (v) => typeof v === 'number' && Number.isInteger(v),
  boolean: (v) => typeof v === 'boolean',
  null: (v) => v === null,
  array: (v) => Array.isArray(v),
  object: (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
};

/**
 * A JSON Schema (2020-12) check of the keywords the facade's document uses: $ref, type, const, enum,
 * anyOf, properties, required, additionalProperties, propertyNames, items, minItems, maxItems,
 * maxProperties, minLength, maxLength, pattern, minimum, maximum (CEL rules are the API server's). Annotations (format, default, description) are not checked.
 * Returns the problems (empty = valid); an unknown keyword is a problem too, so the check cannot
 * silently pass a schema it does not understand.
 */
export function validateSchema(schema: Json, value: unknown, where = '$'): string[] {
  const s = resolve(schema);
  const problems: string[] = [];
  const known = new Set([
    '$ref',
    'type',
    'const',
    'enum',
    'anyOf',
    'properties',
    'required',
    'additionalProperties',
    'propertyNames',
    'items',
    'minItems',
    'maxItems',
    'maxProperties',
    'minLength',
    'maxLength',
    'pattern',
    'minimum',
    'maximum',
    'format',
    'default',
    'description',
    'x-kubernetes-preserve-unknown-fields',
    'x-kubernetes-validations',
  ]);
  for (const k of Object.keys(s))
    if (!known.has(k)) problems.push(`${where}: schema keyword ${k} not understood by the check`);
  if (s.type !== undefined) {
    const types = (Array.isArray(s.type) ? s.type : [s.type]) as string[];
    if (!types.some((t) => TYPE_OF[t]?.(value)))
      return [...problems, `${where}: expected ${types.join(' or ')}, got ${JSON.stringify(value)?.slice(0, 60)}`];
  }
  if ('const' in s && JSON.stringify(s.const) !== JSON.stringify(value))
    problems.push(`${where}: expected ${JSON.stringify(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    problems.push(`${where}: not one of ${JSON.stringify(s.enum)}`);
  if (Array.isArray(s.anyOf) && !(s.anyOf as Json[]).some((alt) => validateSchema(alt, value, where).length === 0)) {
    problems.push(`${where}: matches none of anyOf`);
  }
  if (typeof value === 'string') {
    if (typeof s.minLength === 'number' && [...value].length < s.minLength)
      problems.push(`${where}: shorter than ${s.minLength}`);
    if (typeof s.maxLength === 'number' && [...value].length > s.maxLength)
      problems.push(`${where}: longer than ${s.maxLength}`);
    if (typeof s.pattern === 'string' && !new RegExp(s.pattern, 'u').test(value))
      problems.push(`${where}: does not match ${s.pattern}`);
  }
  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && value < s.minimum) problems.push(`${where}: below ${s.minimum}`);
    if (typeof s.maximum === 'number' && value > s.maximum) problems.push(`${where}: above ${s.maximum}`);
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems)
      problems.push(`${where}: fewer than ${s.minItems} items`);
    if (typeof s.maxItems === 'number' && value.length > s.maxItems)
      problems.push(`${where}: more than ${s.maxItems} items`);
    if (s.items) value.forEach((item, i) => problems.push(...validateSchema(s.items as Json, item, `${where}[${i}]`)));
  }
  if (TYPE_OF.object!(value)) {
    const obj = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, Json>;
    if (typeof s.maxProperties === 'number' && Object.keys(obj).length > s.maxProperties)
      problems.push(`${where}: more than ${s.maxProperties} fields`);
    for (const k of (s.required ?? []) as string[])
      if (!(k in obj)) problems.push(`${where}: missing required field ${k}`);
    for (const [k, v] of Object.entries(obj)) {
      if (s.propertyNames) problems.push(...validateSchema(s.propertyNames as Json, k, `${where} (name ${k})`));
      if (k in props) problems.push(...validateSchema(props[k]!, v, `${where}.${k}`));
      else if (s.additionalProperties === false) problems.push(`${where}: undocumented field ${k}`);
      else if (typeof s.additionalProperties === 'object')
        problems.push(...validateSchema(s.additionalProperties as Json, v, `${where}.${k}`));
    }
  }
  return problems;
}

/** "METHOD template status" of every response the document lists. */
export function documentedResponses(): string[] {
  const out: string[] = [];
  for (const [t, item] of Object.entries(facadeOpenApi.paths as Record<string, Json>)) {
    for (const [m, op] of Object.entries(item)) {
      if (m === 'parameters') continue;
      for (const status of Object.keys((op as Json).responses as Json)) out.push(`${m.toUpperCase()} ${t} ${status}`);
    }
  }
  return out.sort();
}

/** "METHOD template status" of the recorded responses. */
export function observedResponses(recorded: Recorded[]): string[] {
  const out = new Set<string>();
  for (const r of recorded) {
    const t = templateFor(r.path);
    if (t) out.add(`${r.method} ${t} ${r.status}`);
  }
  return [...out].sort();
}

/**
 * Problems of the recorded responses against the OpenAPI document (405 and unknown paths are documented
 * globally): the status is documented for the operation, the body validates (deeply) against its schema
 * with no undocumented field, a 429 carries Retry-After.
 */
export function conformance(recorded: Recorded[]): { problems: string[]; checked: number } {
  const problems: string[] = [];
  let checked = 0;
  for (const r of recorded) {
    const t = templateFor(r.path);
    // HEAD is the GET without its body (HTTP), not an operation of its own in the document
    if (!t || r.status === 405 || r.method === 'HEAD') continue;
    const op = ((facadeOpenApi.paths as Json)[t] as Json)[r.method.toLowerCase()] as Json | undefined;
    const where = `${r.method} ${t} → ${r.status}`;
    if (!op) {
      problems.push(`${where}: operation not documented`);
      continue;
    }
    const resp = (op.responses as Json)[String(r.status)] as Json | undefined;
    if (!resp) {
      problems.push(`${where}: status not documented`);
      continue;
    }
    checked++;
    const schema = ((resp.content as Json | undefined)?.['application/json'] as Json | undefined)?.schema as
      Json | undefined;
    if (schema) problems.push(...validateSchema(schema, r.body, where));
    else problems.push(`${where}: no JSON schema documented`);
    if (r.status === 429 && !r.retryAfter) problems.push(`${where}: Retry-After missing`);
  }
  return { problems, checked };
}

/** Request bodies the facade accepted (2xx) must validate against the documented request schema. */
export function requestConformance(recorded: Recorded[]): { problems: string[]; checked: number } {
  const problems: string[] = [];
  let checked = 0;
  for (const r of recorded) {
    if (r.status < 200 || r.status > 299 || r.request === undefined) continue;
    const t = templateFor(r.path);
    const op = t ? (((facadeOpenApi.paths as Json)[t] as Json)[r.method.toLowerCase()] as Json | undefined) : undefined;
    const schema = (
      ((op?.requestBody as Json | undefined)?.content as Json | undefined)?.['application/json'] as Json | undefined
    )?.schema as Json | undefined;
    if (!schema) continue;
    checked++;
    problems.push(...validateSchema(schema, r.request, `${r.method} ${t} request`));
  }
  return { problems, checked };
}
