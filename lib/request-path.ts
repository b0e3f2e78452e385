/**
 * The request path the gateway routes, checks (`allowed_urls`, per-endpoint limits) and forwards: one
 * path, normalised the way upstreams read it, so that what was checked is what is served. Without it,
 * `/files/public/../admin/x` passed an `allowed_urls` of `/public/.*` and reached `/files/admin/x` on an
 * upstream that resolves dot segments (nginx, static servers), and `/users/`, `/%75sers` or `//users`
 * slipped past a limit on `/users`. As Envoy's `normalize_path` + `merge_slashes`:
 * - percent-escapes of unreserved characters (RFC 3986 §2.3: letters, digits, `-._~`) are decoded;
 *   any other escape stays as sent (`%2F` is not a path separator, and an invalid escape is kept);
 * - runs of `/` become one;
 * - `.` and `..` segments are resolved (RFC 3986 §5.2.4); `..` never climbs above the root.
 * A path without `%`, `//` or a dot segment — nearly every request — is returned as it is, unscanned
 * beyond one pass of indexOf.
 */
export function normalizePath(path: string): string {
  if (path.charCodeAt(0) !== 47 /* not origin-form ("*", absolute-form): routed as it is, to a 404 */) return path;
  const escaped = path.indexOf('%') !== -1;
  if (!escaped && path.indexOf('//') === -1 && path.indexOf('/.') === -1) return path;
  const decoded = escaped ? path.replace(/%([0-9A-Fa-f]{2})/g, decodeUnreserved) : path;
  const out: string[] = [];
  const segments = decoded.split('/');
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i]!;
    const last = i === segments.length - 1;
    if (s === '.' || s === '..') {
      if (s === '..') out.pop();
      if (last) out.push(''); // "/a/.." → "/" ; "/a/b/." → "/a/b/"
      continue;
    }
    if (s === '' && !last) continue; // "//" → "/"
    out.push(s);
  }
  return `/${out.join('/')}`;
}

function decodeUnreserved(escape: string, hex: string): string {
  const c = parseInt(hex, 16);
  const unreserved =
    (c >= 0x30 && c <= 0x39) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x61 && c <= 0x7a) ||
    c === 0x2d ||
    c === 0x2e ||
    c === 0x5f ||
    c === 0x7e;
  return unreserved ? String.fromCharCode(c) : escape;
}

/**
 * strict_paths (docs/contract.md#gateway-configuration): why a request path (raw, as sent, without its query) is refused with 400, or
 * undefined. Each is a form the gateway and common upstreams read differently: a `;` path parameter
 * (Tomcat and Spring drop it, so `/public/..;/admin` is `/admin` there), a backslash (a separator to IIS
 * and some routers), an encoded slash or backslash (`%2F`, `%5C`: decoded into separators downstream)
 * and an encoded NUL (`%00`: ends a path in C-based servers).
 */
export function strictPathProblem(path: string): string | undefined {
  if (path.indexOf(';') !== -1) return 'path parameters (;) are not accepted';
  if (path.indexOf('\\') !== -1) return 'backslashes are not accepted in the path';
  if (path.indexOf('%') !== -1 && /%(?:2f|5c|00)/i.test(path))
    return 'encoded slashes, backslashes and NUL (%2F, %5C, %00) are not accepted in the path';
  return undefined;
}
