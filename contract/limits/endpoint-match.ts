/** Matching a request to per-endpoint rules: API-level compiled rules and key-level access_rights endpoints. */
import type { AccessDefinitionT } from '../../crds/schemas/access-definition.js';
import { endpointPattern, pathMatcher } from '../../lib/path-pattern.js';
import type { CompiledApi, EndpointRule } from '../config.js';

function methodMatches(rule: string, method: string): boolean {
  return rule === '*' || rule === method;
}

/**
 * The first matching API-level rule, in evaluation order. `caseless` (strict_paths): the rule's path
 * matches in any ASCII case; the caller passes HEAD as GET then.
 */
export function matchApiRule(
  api: CompiledApi,
  method: string,
  path: string,
  caseless = false,
): EndpointRule | undefined {
  const rules = api.endpointRules;
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i]!;
    if (methodMatches(r.method, method) && pathMatcher(r.pattern, caseless).test(path)) return r;
  }
  return undefined;
}

/** The key-level per-endpoint limit for this request, if its access definition has one. */
export function matchKeyEndpoint(
  def: AccessDefinitionT | undefined,
  method: string,
  path: string,
  caseless = false,
): { id: string; limit: { rate: number; per: number } } | undefined {
  const eps = def?.endpoints;
  if (!eps || eps.length === 0) return undefined;
  for (const ep of eps) {
    let source: string;
    try {
      source = endpointPattern(ep.path);
    } catch {
      continue;
    }
    if (!pathMatcher(source, caseless).test(path)) continue;
    const m = ep.methods.find((x) => methodMatches(x.name.toUpperCase(), method));
    if (m) return { id: `${m.name.toUpperCase()} ${ep.path}`, limit: m.limit };
  }
  return undefined;
}
