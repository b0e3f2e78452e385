import { compileLinear, PatternError, type LinearMatcher } from './linear-regex.js';

export type { LinearMatcher };

/**
 * Endpoint paths → anchored regex sources, matched by lib/linear-regex.ts (linear time: docs/contract.md#hostile-input). `{name}` wildcards match everything (as in Tyk);
 * classic paths may themselves be regexes (e.g. `.*`). Paths are matched whole against the (normalised,
 * lib/request-path.ts) request path relative to the API's listen path, with or without the leading
 * slash, and with or without one trailing slash (`/users` covers `/users/`, not `/users/1`: write
 * `/users/.*` or `/users/{id}` for those).
 *
 * Braces are read one way only (docs/proxy.md): `{id}`, `{user_id}` (a letter or `_`,
 * then letters, digits or `_`) is a wildcard; `{2}`, `{2,}`, `{2,5}` is a counted quantifier left to
 * the matcher; anything else between braces, or a brace without its pair, is refused (`\{` is a
 * literal brace). Escaped characters and character classes are skipped, so `[{]` and `\{id\}` stay
 * literal.
 */
export function endpointPattern(path: string): string {
  return anchored(regexWildcards(path.replace(/^\//, '').replace(/\/$/, '')));
}

const WILDCARD_NAME = /^[A-Za-z_]\w*$/;
const QUANTIFIER = /^\d+(?:,\d*)?$/;
const BRACES_RULE =
  'braces hold a {name} wildcard (a letter or _, then letters, digits or _) or a counted quantifier ({n}, {n,}, {n,m}); write \\{ and \\} for literal braces';

/** `{name}` wildcards of a regex path → `.*`; quantifiers kept; any other brace refused (PatternError). */
function regexWildcards(path: string): string {
  let out = '';
  let i = 0;
  while (i < path.length) {
    const c = path[i]!;
    if (c === '\\') {
      out += path.slice(i, i + 2);
      i += 2;
    } else if (c === '[') {
      // a class ends at its first unescaped `]` (`[]` is the empty class, as in JavaScript)
      let j = i + 1;
      if (path[j] === '^') j++;
      while (j < path.length && path[j] !== ']') j += path[j] === '\\' ? 2 : 1;
      out += path.slice(i, j + 1);
      i = j + 1;
    } else if (c === '{') {
      const end = path.indexOf('}', i + 1);
      const inner = end === -1 ? undefined : path.slice(i + 1, end);
      if (inner !== undefined && WILDCARD_NAME.test(inner)) out += '.*';
      else if (inner !== undefined && QUANTIFIER.test(inner)) out += `{${inner}}`;
      else throw new PatternError(`${JSON.stringify(path.slice(i, end === -1 ? i + 1 : end + 1))}: ${BRACES_RULE}`);
      i = end + 1;
    } else if (c === '}') {
      throw new PatternError(`"}" without its "{": ${BRACES_RULE}`);
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** An OpenAPI path template's parameter name: OpenAPI documents often use `-` and `.` in them too. */
const OAS_PARAMETER = /^[A-Za-z_][\w.-]*$/;

/**
 * An OpenAPI path (`/items/{id}`, `/$metadata`, `/v1.0/sum+count`) → an anchored regex source: the
 * path is literal apart from its `{name}` wildcards (OpenAPI paths are not regexes: `$`, `+`, `.` and
 * brackets are literal). A brace that is not a parameter name (`{2}`, `{}`, a lone
 * brace) is refused rather than read as a wildcard or a quantifier.
 */
export function oasPathPattern(path: string): string {
  const literal = path
    .replace(/^\//, '')
    .replace(/\/$/, '')
    .split(/(\{[^{}]*\})/)
    .map((part) => {
      if (part.startsWith('{') && part.endsWith('}')) {
        if (OAS_PARAMETER.test(part.slice(1, -1))) return '.*';
        throw new PatternError(
          `${JSON.stringify(part)}: an OpenAPI path's braces hold a parameter name (a letter or _, then letters, digits, _, - or .)`,
        );
      }
      if (/[{}]/.test(part))
        throw new PatternError(`a brace without its pair in the OpenAPI path ${JSON.stringify(path)}`);
      return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
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
  'must be a valid regular expression the gateway can match in linear time ({name} wildcards allowed, {n}, {n,}, {n,m} quantifiers)';

/** A zod superRefine of a pattern field: the issue names why the pattern is refused. */
export function refineEndpointPattern(
  path: string,
  ctx: { addIssue(i: { code: 'custom'; message: string }): void },
): void {
  const problem = endpointPatternProblem(path);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `${INVALID_PATTERN}: ${problem}` });
}
