/**
 * Endpoint paths → anchored regex sources. `{name}` wildcards match everything (the spec's rule);
 * classic paths may themselves be regexes (e.g. `.*`). Paths are matched against the request path
 * relative to the API's listen path, with or without the leading slash.
 */
export function endpointPattern(path: string): string {
  const body = path.replace(/^\//, '').replace(/\{[^/{}]+\}/g, '.*');
  const source = `^/?(?:${body})$`;
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
