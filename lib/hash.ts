const { createHash, timingSafeEqual } = process.getBuiltinModule('node:crypto');

/** SHA-256 hex of `value`'s bytes in `encoding` (utf8; latin1 for a header value as node:http decodes it). */
export function sha256hex(value: string, encoding: 'utf8' | 'latin1' = 'utf8'): string {
  return createHash('sha256').update(value, encoding).digest('hex');
}

/** Constant-time string comparison (hashes both sides so lengths never leak). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}
