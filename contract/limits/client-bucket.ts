/**
 * The bucket of one client of a per-client API-level limit (docs/contract.md#limit-by, `limit_by`): the API-scope
 * bucket with the client's identity, so distinct clients never share a bucket and every limiter (DRL,
 * sliding log, sentinel, fixed window) counts them apart without knowing about clients.
 *   `a:<ns>/<api>:ip:<address>[:e:<rule>]`  the address (or IPv6 network) text, `%` and `:` escaped (%25, %3A)
 *   `a:<ns>/<api>:hd:<sha256>[:e:<rule>]`   a header value's SHA-256 (base64url): a header may carry a
 *                                            credential, which must never reach the store (key names
 *                                            included); the digest also bounds the name's length
 * Neither part holds `:` once escaped, so the parts of a name stay unambiguous (`api_id` and the
 * namespace hold none either).
 */
import type { ClientKey } from '../config.js';
const { hash } = process.getBuiltinModule('node:crypto');

const ESCAPES: Record<string, string> = { '%': '%25', ':': '%3A' };
const escape = (s: string): string => (/[%:]/.test(s) ? s.replace(/[%:]/g, (c) => ESCAPES[c]!) : s);

/**
 * `apiBucket`: `a:<ns>/<api>`; `client`: the client's address identity (`ip`) or the header's value ('' when
 * absent: every request without it shares that allowance); `ruleId`: the endpoint rule, if the limit is one.
 */
export function clientBucket(apiBucket: string, by: ClientKey, client: string, ruleId?: string): string {
  const who = by.kind === 'ip' ? `:ip:${escape(client)}` : `:hd:${hash('sha256', client, 'base64url')}`;
  // trim() returns the name as one flat string: a concatenation is a rope V8 keeps in its parts (three
  // more objects for as long as the bucket is held, and slower to hash and compare as a map key)
  return (ruleId === undefined ? apiBucket + who : `${apiBucket}${who}:e:${ruleId}`).trim();
}
