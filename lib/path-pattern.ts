import { compileLinear, PatternError, type LinearMatcher } from './linear-regex.js';

export type { LinearMatcher };

/**
 * Endpoint paths → anchored regex sources, matched by lib/linear-regex.ts (linear time: docs/contract.md#hostile-input). `{name}` wildcards match everything (the spec's rule);
 * classic paths may themselves be regexes (e.g. `.*`). Paths are matched whole against the (normalised,
 * lib/request-path.ts) request path relative to the API's listen path, with or without the leading
 * slash, and with or without one trailing slash (`/users` covers `/users/`, not `/users/1`: write
 * `/users/.*` or `/users/{id}` for those).
 */
export function endpointPattern(path: string): string {
  return anchored(
    path
      .replace(/^\//, '')
      .replace(/\/$/, '')
      .replace(/\{[^/{}]+\}/g, '.*'),
  );
}

/**
 * An OpenAPI path (`/items/{id}`, `/$metadata`, `/v1.0/sum+count`) → an anchored regex source: the
 * path is literal apart from its `{name}` wildcards (OpenAPI paths are not regexes: `$`, `+`, `.` and
 * brackets are literal).
 */
export function oasPathPattern(path: string): string {
  const literal = path
    .replace(/^\//, '')
    .replace(/\/$/, '')
    .split(/(\{[^/{}]+\})/)
    .map((part) => (/^\{[^/{}]+\}$/.test(part) ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return anchored(literal);
}

function anchored(body: string): string {
  const source = `^/?(?:${body})/?$`;
  pathMatcher(source, false, true); // throws on a pattern that cannot be matched in linear time, naming why
  return source;
}

const NEVER: LinearMatcher = { test: () => false };
const MAX_CACHED = 50_000;
// one map per flag, keyed by the source itself: the request path looks a matcher up without building a key
const matchers = new Map<string, LinearMatcher>();
const caselessMatchers = new Map<string, LinearMatcher>();

/**
 * The linear-time matcher of an anchored source (endpointPattern, oasPathPattern), compiled once per
 * process and flags. `caseless`: ASCII letters in any case (strict_paths). A source that cannot be
 * compiled matches nothing, or throws PatternError with `strict`.
 */
export function pathMatcher(source: string, caseless = false, strict = false): LinearMatcher {
  const cache = caseless ? caselessMatchers : matchers;
  let m = cache.get(source);
  if (!m) {
    try {
      m = compileLinear(source, caseless);
    } catch (e) {
      if (strict) throw e;
      m = NEVER;
    }
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(source, m);
  }
  if (strict && m === NEVER) compileLinear(source, caseless); // throws again, with its reason
  return m;
}

/** Why endpointPattern refuses `path` (a path that would never match, or could not be matched in linear time); undefined when it does not. */
export function endpointPatternProblem(path: string): string | undefined {
  try {
    endpointPattern(path);
    return undefined;
  } catch (e) {
    return e instanceof PatternError ? e.message : String(e);
  }
}

/** Whether endpointPattern accepts `path`. */
export const validEndpointPattern = (path: string): boolean => endpointPatternProblem(path) === undefined;

export const INVALID_PATTERN =
  'must be a valid regular expression the gateway can match in linear time ({name} wildcards allowed)';

/** A zod superRefine of a pattern field: the issue names why the pattern is refused. */
export function refineEndpointPattern(
  path: string,
  ctx: { addIssue(i: { code: 'custom'; message: string }): void },
): void {
  const problem = endpointPatternProblem(path);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `${INVALID_PATTERN}: ${problem}` });
}
