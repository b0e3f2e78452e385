/** Shared by the facade tests: a facade over a temp resources dir, real HTTP calls, an OpenAPI check. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { request } from 'undici';
import { DirSource } from '../../../controller/sources/dir-source.js';
import { DirBackend } from '../../../controller/facade/backend-dir.js';
import type { QuotaState } from '../../../controller/facade/backend.js';
import { facadeOpenApi } from '../../../controller/facade/openapi.js';
import { createFacadeServer, type FacadeServerOptions } from '../../../controller/facade/server.js';
import { GatewayOptions, type GatewayOptionsT } from '../../../lib/options.js';

export const TOKEN = 'facade-test-token-0123456789';
export const SECRET = 'facade-test-secret-0123456789';

export interface Recorded {
  method: string;
  path: string;
  status: number;
  body: unknown;
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
  call(method: string, path: string, init?: CallInit): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: unknown; text: string }>;
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
`;

export async function startFacade(
  extra: Partial<Omit<FacadeServerOptions, 'backend' | 'logger' | 'options'>> & { options?: Partial<GatewayOptionsT> } = {},
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
  const quotas = new Map<string, QuotaState>();
  const backend = new DirBackend({
    dir,
    snapshot: () => source.current(),
    quota: async (h) => quotas.get(h),
    onWrite: () => {
      source.reload();
    },
  });
  const options = GatewayOptions.parse({ secret: SECRET, access_tokens: ['other-token', TOKEN], ...extra.options });
  const { options: _o, ...rest } = extra;
  const server = createFacadeServer({ backend, logger, options, gatewayOrigins: ['http://127.0.0.1:1'], ...rest });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const recorded: Recorded[] = [];
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
      const r = await request(url + path, { method: method as 'GET', headers, body });
      const text = await r.body.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text) as unknown;
      } catch {
        // not JSON
      }
      recorded.push({ method, path: path.split('?')[0]!, status: r.statusCode, body: parsed });
      return { status: r.statusCode, headers: r.headers, body: parsed, text };
    },
    async close() {
      source.stop();
      await new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return f;
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

function checkObject(schema: Json, body: unknown, where: string): string[] {
  const s = resolve(schema);
  const problems: string[] = [];
  if (s.type === 'array') {
    if (!Array.isArray(body)) return [`${where}: expected an array`];
    body.forEach((item, i) => problems.push(...checkObject(s.items as Json, item, `${where}[${i}]`)));
    return problems;
  }
  if (s.type !== 'object') return [];
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [`${where}: expected an object`];
  const props = (s.properties ?? {}) as Json;
  if (s.additionalProperties === false) {
    for (const k of Object.keys(body)) if (!(k in props)) problems.push(`${where}: undocumented field ${k}`);
  }
  for (const k of (s.required ?? []) as string[]) if (!(k in body)) problems.push(`${where}: missing required field ${k}`);
  return problems;
}

/** Problems of the recorded responses against the OpenAPI document (405 and unknown paths are documented globally). */
export function conformance(recorded: Recorded[]): { problems: string[]; checked: number } {
  const problems: string[] = [];
  let checked = 0;
  for (const r of recorded) {
    const t = templateFor(r.path);
    if (!t || r.status === 405) continue;
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
    const schema = ((resp.content as Json | undefined)?.['application/json'] as Json | undefined)?.schema as Json | undefined;
    if (schema) problems.push(...checkObject(schema, r.body, where));
  }
  return { problems, checked };
}
