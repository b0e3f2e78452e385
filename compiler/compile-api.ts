/** ApiDefinition (classic or OAS form) → CompiledApi. Throws with a field-named message on a bad definition. */
import type { ApiDefinition } from '../crds/kinds.js';
import { apiIdOf, MAX_TOKENS_PER_CLIENT, OAUTH_GRANTS } from '../crds/schemas/api-definition.js';
import type { ApiLimitSpec, ClientKey, CompiledApi, CompiledOAuth, EndpointRule } from '../contract/config.js';
import { durationSeconds } from '../lib/duration.js';
import { endpointPattern, oasPathPattern } from '../lib/path-pattern.js';

const OAS_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** limit_by (validated by the schema) → whose allowance: absent for `api` (one for every caller). */
export function clientKeyOf(limitBy: string | undefined): ClientKey | undefined {
  if (limitBy === undefined || limitBy === 'api') return undefined;
  if (limitBy === 'ip') return { kind: 'ip' };
  return { kind: 'header', name: limitBy.slice('header:'.length).toLowerCase() };
}

function limitOrUndefined(rate: number, per: number, limitBy?: string): ApiLimitSpec | undefined {
  if (rate === 0 && per === 0) return undefined;
  const by = clientKeyOf(limitBy);
  return by ? { rate, per, by } : { rate, per };
}

function rule(
  method: string,
  path: string,
  rate: number,
  per: number,
  field: string,
  limitBy: string | undefined,
  pattern = endpointPattern,
): EndpointRule {
  try {
    const by = clientKeyOf(limitBy);
    const r: EndpointRule = {
      method: method.toUpperCase(),
      pattern: pattern(path),
      rate,
      per,
      id: `${method.toUpperCase()} ${path}`,
    };
    return by ? { ...r, by } : r;
  } catch (e) {
    throw new Error(`${field}: invalid path pattern ${JSON.stringify(path)}: ${(e as Error).message}`, { cause: e });
  }
}

/** Whether an API takes the gateway's bearer tokens (docs/oauth.md): classic use_oauth2, or the OAS oauth2 authentication. */
export function usesOAuth(res: ApiDefinition): boolean {
  const s = res.spec;
  return s.use_oauth2 === true || s.oas?.['x-gw-api-gateway'].server.authentication?.oauth2?.enabled === true;
}

/** OAuth settings of an API: the OAS oauth2 object (camelCase, then its snake_case aliases), then spec.oauth_meta. */
function compileOAuth(res: ApiDefinition): CompiledOAuth | undefined {
  if (!usesOAuth(res)) return undefined;
  const s = res.spec;
  const o = s.oas?.['x-gw-api-gateway'].server.authentication?.oauth2;
  const m = s.oauth_meta;
  const grants = o?.allowedAccessTypes ?? o?.allowed_access_types ?? m?.allowed_access_types ?? [...OAUTH_GRANTS];
  const loginRedirect = o?.authLoginRedirect ?? o?.auth_login_redirect ?? m?.auth_login_redirect;
  return {
    grants: [...new Set(grants)],
    ...(loginRedirect !== undefined ? { loginRedirect } : {}),
    accessTtl: o?.accessTokenExpires ?? o?.access_token_expires ?? m?.access_token_expires ?? 3600,
    refreshTtl: o?.refreshTokenExpires ?? o?.refresh_token_expires ?? m?.refresh_token_expires ?? 1209600,
    maxTokensPerClient:
      o?.maxTokensPerClient ?? o?.max_tokens_per_client ?? m?.max_tokens_per_client ?? MAX_TOKENS_PER_CLIENT,
  };
}

export function compileApi(res: ApiDefinition): CompiledApi {
  const oauth = compileOAuth(res);
  const s = res.spec;
  const base = {
    namespace: res.metadata.namespace,
    name: res.metadata.name,
    authHeader: (s.auth?.auth_header_name ?? 'Authorization').toLowerCase(),
    streaming: (s as { streaming?: unknown }).streaming,
    ...(oauth ? { oauth } : {}),
  };
  if (s.oas) {
    const x = s.oas['x-gw-api-gateway'];
    const rules: EndpointRule[] = [];
    const ops = x.middleware?.operations ?? {};
    const seen = new Map<string, string>(); // operationId → where it was first defined
    for (const [path, item] of Object.entries(s.oas.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (!OAS_METHODS.includes(method)) continue;
        const opId = (op as { operationId?: unknown } | null)?.operationId;
        if (typeof opId !== 'string') continue;
        const where = `spec.oas.paths.${path}.${method}.operationId`;
        // OpenAPI: operationIds are unique; a middleware entry must name exactly one operation.
        if (seen.has(opId))
          throw new Error(`${where}: duplicate operationId ${JSON.stringify(opId)} (also at ${seen.get(opId)})`);
        seen.set(opId, where);
        const rl = ops[opId]?.rateLimit;
        // enabled, and not 0/0 (a pair of zeros disables the limit, as everywhere)
        if (rl?.enabled && limitOrUndefined(rl.rate, durationSeconds(rl.per))) {
          const field = `spec.oas.x-gw-api-gateway.middleware.operations.${opId}.rateLimit`;
          rules.push(rule(method, path, rl.rate, durationSeconds(rl.per), field, rl.limit_by, oasPathPattern));
        }
      }
    }
    // A middleware entry for an operation the document does not have would limit nothing, silently.
    for (const opId of Object.keys(ops)) {
      if (!seen.has(opId)) {
        throw new Error(
          `spec.oas.x-gw-api-gateway.middleware.operations.${opId}: no operation in spec.oas.paths has operationId ${JSON.stringify(opId)}`,
        );
      }
    }
    const up = x.upstream?.rateLimit;
    const apiLimit =
      up?.enabled && !s.disable_rate_limit
        ? limitOrUndefined(up.rate, durationSeconds(up.per), up.limit_by)
        : undefined;
    return {
      ...base,
      api_id: apiIdOf(res),
      // either switch turns the API off (state.active defaults to true once info.state is given)
      active: s.active && (x.info?.state?.active ?? true),
      keyless: s.use_keyless || x.server.authentication?.enabled === false,
      ...((x.server.authentication?.stripAuthorizationData ?? s.strip_auth_data) ? { stripAuth: true as const } : {}),
      listenPath: x.server.listenPath.value,
      strip: x.server.listenPath.strip,
      targetUrl: x.upstream?.url ?? s.proxy?.target_url,
      apiLimit,
      endpointRules: s.disable_rate_limit ? [] : rules,
      streaming: s.streaming ?? (s.oas as Record<string, unknown>)['x-gw-streaming'],
    };
  }
  const proxy = s.proxy!; // the schema requires proxy.listen_path without oas
  const rules =
    s.use_extended_paths && !s.disable_rate_limit
      ? (s.extended_paths?.rate_limit ?? [])
          .map((r, i) => ({ r, i }))
          .filter(({ r }) => r.enabled && limitOrUndefined(r.rate, r.per)) // 0/0 disables the rule, like enabled: false
          .map(({ r, i }) =>
            rule(r.method, r.path, r.rate, r.per, `spec.extended_paths.rate_limit[${i}].path`, r.limit_by),
          )
      : [];
  const g = s.global_rate_limit;
  return {
    ...base,
    api_id: apiIdOf(res),
    active: s.active,
    keyless: s.use_keyless,
    ...(s.strip_auth_data ? { stripAuth: true as const } : {}),
    listenPath: proxy.listen_path!,
    strip: proxy.strip_listen_path,
    targetUrl: proxy.target_url,
    ...(proxy.transport !== undefined ? { transport: proxy.transport } : {}),
    apiLimit: g && !s.disable_rate_limit ? limitOrUndefined(g.rate, g.per, g.limit_by) : undefined,
    endpointRules: rules,
  };
}
