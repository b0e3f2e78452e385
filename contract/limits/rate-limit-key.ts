/**
 * Custom rate-limit keys (docs/contract.md#rate-limit-pattern): `$gw_meta.NAME` expands to the key's metadata value (missing →
 * empty); everything else, `|` included, is literal. A non-empty result replaces the key identity for
 * rate limits, quotas and throttling; an empty one falls back to the key.
 */
export function expandPattern(pattern: string, meta: Record<string, unknown>): string {
  return pattern.replace(/\$gw_meta\.([A-Za-z0-9_\-.]+)/g, (_m, name: string) => {
    // own fields only: `constructor`, `toString` or `__proto__` are not metadata (they made unrelated
    // keys share one allowance)
    const v = Object.hasOwn(meta, name) ? meta[name] : undefined;
    if (v === undefined || v === null) return '';
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  });
}

const ESCAPES: Record<string, string> = { '%': '%25', ':': '%3A' };

/**
 * The identity limits are counted against. Pattern identities and key hashes never collide, and two
 * different expansions never name one bucket: `:` separates the parts of a bucket name
 * (`k:<identity>:a:<api>`), so it is escaped in the expansion (with `%`, so the escaping is reversible).
 */
export function limiterIdentity(keyHash: string, pattern: string | undefined, meta: Record<string, unknown>): string {
  if (pattern) {
    const v = expandPattern(pattern, meta);
    if (v !== '') return `p:${/[%:]/.test(v) ? v.replace(/[%:]/g, (c) => ESCAPES[c]!) : v}`;
  }
  return `h:${keyHash}`;
}
