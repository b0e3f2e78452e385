/**
 * Endpoint paths → anchored regex sources. `{name}` wildcards match everything (the spec's rule);
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
 * path is literal apart from its `{name}` wildcards (OpenAPI paths are not regexes; `$`, `+`, `.` and
 * brackets used to be read as regex syntax).
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
  new RegExp(source); // throws on an invalid pattern, naming it in the caller's error
  return source;
}

/** Whether endpointPattern accepts `path` (the schemas refuse a path that would never match anything). */
export function validEndpointPattern(path: string): boolean {
  try {
    endpointPattern(path);
    return true;
  } catch {
    return false;
  }
}

export const INVALID_PATTERN = 'must be a valid regular expression ({name} wildcards allowed)';
