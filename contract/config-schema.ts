/** Validation of the compiled config read from a ConfigMap (another process's output is still input). */
import { z } from 'zod';
import { PolicySpec } from '../crds/schemas/policy.js';
import { HEADER_NAME_PATTERN, refinePer, Smoothing } from '../crds/schemas/common.js';
import type { CompiledConfig } from './config.js';
import { pathMatcher } from '../lib/path-pattern.js';
import { MAX_TOKENS_PER_CLIENT, OAUTH_GRANTS } from '../crds/schemas/api-definition.js';

/** limit_by, compiled: a header name is lower case (as node:http gives request headers). */
const ClientKey = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('ip') }),
  z.strictObject({
    kind: z.literal('header'),
    name: z
      .string()
      .regex(HEADER_NAME_PATTERN, 'must be an HTTP header name')
      .refine((n) => n === n.toLowerCase(), 'must be lower case'),
  }),
]);

// a rate needs a window (refinePer, the resource schemas' own rule): rate > 0 with per 0 meant no limit at all
const LimitSpec = z
  .object({
    rate: z.number().min(0),
    per: z.number().min(0),
    smoothing: Smoothing.nullable().optional(),
    by: ClientKey.optional(),
  })
  .superRefine(refinePer);

const CompiledApiSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  api_id: z.string(),
  active: z.boolean(),
  keyless: z.boolean(),
  authHeader: z.string(),
  stripAuth: z.literal(true).optional(),
  listenPath: z.string().startsWith('/'),
  strip: z.boolean(),
  targetUrl: z.string().optional(),
  transport: z
    .object({
      ssl_ca_cert_file: z.string().optional(),
      ssl_cert_file: z.string().optional(),
      ssl_key_file: z.string().optional(),
      ssl_server_name: z.string().optional(),
      ssl_insecure_skip_verify: z.boolean().optional(),
    })
    .optional(),
  apiLimit: LimitSpec.optional(),
  endpointRules: z.array(
    z
      .object({
        method: z.string(),
        pattern: z.string().superRefine((p, ctx) => {
          try {
            pathMatcher(p, false, true);
          } catch (e) {
            ctx.addIssue({
              code: 'custom',
              message: `must be a pattern matched in linear time: ${(e as Error).message}`,
            });
          }
        }),
        rate: z.number().min(0),
        per: z.number().min(0),
        id: z.string(),
        by: ClientKey.optional(),
      })
      .superRefine(refinePer),
  ),
  oauth: z
    .object({
      grants: z.array(z.enum(OAUTH_GRANTS)),
      loginRedirect: z.string().optional(),
      accessTtl: z.number().int().min(1),
      refreshTtl: z.number().int().min(1),
      // a config compiled before the bound existed: the default bound
      maxTokensPerClient: z.number().int().min(1).default(MAX_TOKENS_PER_CLIENT),
    })
    .optional(),
  streaming: z.unknown().optional(),
});

export const CompiledConfigSchema = z.object({
  hash: z.string(),
  apis: z.array(CompiledApiSchema).superRefine((apis, ctx) => {
    // one listen path, one API; one api_id per namespace, one API (its buckets and access rights): the
    // controller refuses the second; a hand-written config must too
    const seen = new Map<string, string>();
    const ids = new Map<string, string>();
    apis.forEach((a, i) => {
      const first = seen.get(a.listenPath);
      if (first !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [i, 'listenPath'],
          message: `${a.listenPath} is also the listen path of ${first}`,
        });
      else seen.set(a.listenPath, `${a.namespace}/${a.name}`);
      const id = `${a.namespace}/${a.api_id}`;
      const firstId = ids.get(id);
      if (firstId !== undefined)
        ctx.addIssue({ code: 'custom', path: [i, 'api_id'], message: `${a.api_id} is also the api_id of ${firstId}` });
      else ids.set(id, `${a.namespace}/${a.name}`);
    });
  }),
  policies: z.record(z.string(), z.object({ namespace: z.string(), name: z.string(), spec: PolicySpec })),
});

export const CONFIG_MAP_NAME = 'gw-config';
export const CONFIG_MAP_KEY = 'config.json';

/** The part of a ConfigMap the sidecar and the controller read; its `config.json` is validated by parseCompiledConfig. */
export const ConfigMapData = z.looseObject({ data: z.record(z.string(), z.string()).nullish() });

export function parseCompiledConfig(
  text: string,
): { ok: true; config: CompiledConfig } | { ok: false; message: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { ok: false, message: `${CONFIG_MAP_KEY}: invalid JSON: ${(e as Error).message}` };
  }
  const r = CompiledConfigSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    return { ok: false, message: `${CONFIG_MAP_KEY}: ${i.path.join('.')}: ${i.message}` };
  }
  return { ok: true, config: r.data as CompiledConfig };
}
