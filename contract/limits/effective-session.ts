/**
 * A key's effective session (docs/contract.md#policies): with apply_policies, the policies set the limits and the
 * access rights become the union of theirs. For the global limit, each per-API limit and each
 * per-endpoint limit (`METHOD path`) the policy with the highest rate/per wins and its rate, per and
 * smoothing are taken together (90/30 + 100/10 → 100/10, never the pre-5.4.0 100/30). Ties keep the
 * earlier policy. Quota: highest quota_max (≤ 0 = unlimited = highest) and highest renewal; throttle:
 * highest values; meta_data merged, the key's own values win.
 * A key naming a missing or inactive policy gets an Error: it is refused (fail closed).
 */
import type { AccessDefinitionT, ApiLimitT } from '../../crds/schemas/access-definition.js';
import type { SmoothingT } from '../../crds/schemas/common.js';
import type { PolicySpecT } from '../../crds/schemas/policy.js';
import type { StoredSession } from '../sessions.js';
import type { CompiledConfig } from '../config.js';

export interface EffectiveSession {
  rate?: number;
  per?: number;
  smoothing?: SmoothingT | null;
  quota_max?: number;
  quota_renewal_rate?: number;
  throttle_interval?: number;
  throttle_retry_limit?: number;
  access_rights: Record<string, AccessDefinitionT>;
  meta_data: Record<string, unknown>;
  /** rate_limit_pattern of the applied policies (docs/contract.md#rate-limit-pattern), unexpanded. */
  rate_limit_pattern?: string;
  /**
   * The policy (metadata.name, the key's namespace) whose rate, per and smoothing won, for the global
   * limit and for each per-API limit: the resource a smoothing event belongs to. Absent: the key's own.
   */
  limit_policy?: { global?: string; apis: Record<string, string> };
}

type RatePair = { rate?: number; per?: number };

/**
 * rate/per, for choosing among policies. undefined = no limit given, and a 0/0 limit ("disabled") counts as
 * none too: as in Tyk, a policy that writes out rate 0 / per 0 (an access-only or quota-only policy) sets
 * no rate and does not lift the limit of the other policies; with no other limit the key has none.
 */
export function effectiveRate(l: RatePair | null | undefined): number | undefined {
  if (!l || l.rate === undefined || l.per === undefined) return undefined;
  if (l.rate === 0 && l.per === 0) return undefined;
  return l.per > 0 ? l.rate / l.per : Infinity;
}

/** The candidate with the highest effective rate; the earlier one on a tie. */
export function highestRate<T extends RatePair>(candidates: (T | null | undefined)[]): T | undefined {
  let best: T | undefined;
  let bestRate = -1;
  for (const c of candidates) {
    const r = effectiveRate(c);
    if (r !== undefined && r > bestRate) {
      best = c!;
      bestRate = r;
    }
  }
  return best;
}

function highestQuota(values: (number | undefined)[]): number | undefined {
  const given = values.filter((v): v is number => v !== undefined);
  if (given.length === 0) return undefined;
  if (given.some((v) => v <= 0)) return -1;
  return Math.max(...given);
}

function highest(values: (number | undefined)[]): number | undefined {
  const given = values.filter((v): v is number => v !== undefined);
  return given.length ? Math.max(...given) : undefined;
}

/** Per-API limits of several policies: rate, per and smoothing of the highest rate/per; quota and throttle highest. */
function mergeApiLimit(limits: ApiLimitT[]): ApiLimitT | null {
  if (limits.length === 0) return null;
  const win = highestRate(limits);
  const out: ApiLimitT = {};
  if (win) {
    out.rate = win.rate;
    out.per = win.per;
    if (win.smoothing !== undefined) out.smoothing = win.smoothing;
  }
  const quotaMax = highestQuota(limits.map((l) => l.quota_max));
  if (quotaMax !== undefined) out.quota_max = quotaMax;
  const renewal = highest(limits.map((l) => l.quota_renewal_rate));
  if (renewal !== undefined) out.quota_renewal_rate = renewal;
  const interval = highest(limits.map((l) => l.throttle_interval));
  if (interval !== undefined) out.throttle_interval = interval;
  const retries = highest(limits.map((l) => l.throttle_retry_limit));
  if (retries !== undefined) out.throttle_retry_limit = retries;
  return out;
}

function mergeAccess(
  policies: PolicySpecT[],
  names: string[],
  limitPolicy: Record<string, string>,
): Record<string, AccessDefinitionT> {
  const out: Record<string, AccessDefinitionT> = {};
  const apiIds = [...new Set(policies.flatMap((p) => Object.keys(p.access_rights ?? {})))];
  for (const apiId of apiIds) {
    const defs = policies.map((p) => p.access_rights?.[apiId]).filter((d): d is AccessDefinitionT => !!d);
    const first = defs[0]!;
    const limits = defs.map((d) => d.limit).filter((l): l is ApiLimitT => !!l);
    const limit = mergeApiLimit(limits);
    const won = highestRate(limits);
    const wonAt = won ? policies.findIndex((p) => p.access_rights?.[apiId]?.limit === won) : -1;
    if (wonAt >= 0) limitPolicy[apiId] = names[wonAt]!;
    // a definition without allowed_urls allows every URL, so the union does too
    const unrestricted = defs.some((d) => !d.allowed_urls?.length);
    const urls = new Map<string, Set<string>>();
    if (!unrestricted)
      for (const d of defs)
        for (const u of d.allowed_urls ?? []) {
          const set = urls.get(u.url) ?? new Set<string>();
          u.methods.forEach((m) => set.add(m));
          urls.set(u.url, set);
        }
    // per-endpoint: highest rate per METHOD path
    const byEndpoint = new Map<string, { path: string; name: string; limit: { rate: number; per: number } }[]>();
    for (const d of defs)
      for (const ep of d.endpoints ?? [])
        for (const m of ep.methods) {
          const id = `${m.name.toUpperCase()} ${ep.path}`;
          const list = byEndpoint.get(id) ?? [];
          list.push({ path: ep.path, name: m.name.toUpperCase(), limit: m.limit });
          byEndpoint.set(id, list);
        }
    const endpoints = new Map<string, { name: string; limit: { rate: number; per: number } }[]>();
    for (const list of byEndpoint.values()) {
      const win = highestRate(list.map((x) => x.limit));
      const chosen = list.find((x) => x.limit === win) ?? list[0]!; // all 0/0: the (disabled) first
      const methods = endpoints.get(chosen.path) ?? [];
      methods.push({ name: chosen.name, limit: chosen.limit });
      endpoints.set(chosen.path, methods);
    }
    out[apiId] = {
      api_id: first.api_id ?? apiId,
      api_name: first.api_name,
      versions: [...new Set(defs.flatMap((d) => d.versions ?? []))],
      allowed_urls: [...urls].map(([url, methods]) => ({ url, methods: [...methods] })),
      limit,
      endpoints: [...endpoints].map(([path, methods]) => ({ path, methods })),
    };
  }
  return out;
}

const cache = new WeakMap<StoredSession, { hash: string; value: EffectiveSession | Error }>();

export function effectiveSession(stored: StoredSession, config: CompiledConfig): EffectiveSession | Error {
  const hit = cache.get(stored);
  if (hit && hit.hash === config.hash) return hit.value;
  const value = compute(stored, config);
  cache.set(stored, { hash: config.hash, value });
  return value;
}

function compute(stored: StoredSession, config: CompiledConfig): EffectiveSession | Error {
  const s = stored.session;
  const names = s.apply_policies?.length ? s.apply_policies : s.apply_policy_id ? [s.apply_policy_id] : [];
  const keyMeta = (s.meta_data ?? {}) as Record<string, unknown>;
  if (names.length === 0) {
    return {
      rate: s.rate,
      per: s.per,
      smoothing: s.smoothing,
      quota_max: s.quota_max,
      quota_renewal_rate: s.quota_renewal_rate,
      throttle_interval: s.throttle_interval,
      throttle_retry_limit: s.throttle_retry_limit,
      access_rights: s.access_rights ?? {},
      meta_data: keyMeta,
    };
  }
  const policies: PolicySpecT[] = [];
  const applied: string[] = [];
  for (const name of names) {
    const p = config.policies[`${stored.namespace}/${name}`];
    if (!p) return new Error(`policy ${stored.namespace}/${name} not found`);
    if (!p.spec.active) return new Error(`policy ${stored.namespace}/${name} is inactive`);
    policies.push(p.spec);
    applied.push(name);
  }
  const global = highestRate(policies);
  const apis: Record<string, string> = {};
  const policyMeta = Object.assign({}, ...policies.map((p) => p.meta_data ?? {})) as Record<string, unknown>;
  const pattern = policyMeta.rate_limit_pattern;
  return {
    rate: global?.rate,
    per: global?.per,
    smoothing: global?.smoothing,
    quota_max: highestQuota(policies.map((p) => p.quota_max)),
    quota_renewal_rate: highest(policies.map((p) => p.quota_renewal_rate)),
    throttle_interval: highest(policies.map((p) => p.throttle_interval)),
    throttle_retry_limit: highest(policies.map((p) => p.throttle_retry_limit)),
    access_rights: mergeAccess(policies, applied, apis),
    meta_data: { ...policyMeta, ...keyMeta },
    rate_limit_pattern: typeof pattern === 'string' ? pattern : undefined,
    limit_policy: { global: global ? applied[policies.indexOf(global)] : undefined, apis },
  };
}
