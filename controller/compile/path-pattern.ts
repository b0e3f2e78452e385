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
