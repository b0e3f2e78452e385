/**
 * URLs in log lines: userinfo (http://user:pass@host) and query values (?api_key=…) carry credentials
 * often enough that neither ever reaches a log line. A log shows the scheme, host, path and the names of
 * the query parameters; texts that might quote a URL (a library's error message) are scrubbed of its
 * secrets too. A credential in the path (webhook URLs such as /services/T0/B0/XXXX) is not recognised.
 */
const MASK = '***';

/** Secrets shorter than this are not scrubbed from texts (a value of "1" would mangle every number). */
const MIN_SECRET = 4;

/** "http://u:p@h:1/x?api_key=k&flag#f" → "http://***@h:1/x?api_key=***&***" (the fragment is dropped). */
export function redactUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return '[unparseable URL]';
  }
  const auth = u.username || u.password ? `${MASK}@` : '';
  const query = u.search
    ? `?${u.search
        .slice(1)
        .split('&')
        .map((p) => (p.includes('=') ? `${p.slice(0, p.indexOf('='))}=${MASK}` : MASK))
        .join('&')}`
    : '';
  return `${u.protocol}//${auth}${u.host}${u.pathname}${query}`;
}

/** The credential parts of a URL as written and decoded: user, password, query values (and bare names). */
export function urlSecrets(raw: string): string[] {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return [raw];
  }
  const out = [u.username, u.password];
  for (const p of u.search.slice(1).split('&')) out.push(p.includes('=') ? p.slice(p.indexOf('=') + 1) : p);
  const decoded = out.map((s) => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '));
    } catch {
      return s;
    }
  });
  return [...out, ...decoded];
}

/** `text` with every secret (of MIN_SECRET characters or more) replaced by ***; longest first. */
export function scrub(text: string, secrets: readonly string[]): string {
  const list = [...new Set(secrets.filter((s) => s.length >= MIN_SECRET))].sort((a, b) => b.length - a.length);
  let out = text;
  for (const s of list) out = out.split(s).join(MASK);
  return out;
}
