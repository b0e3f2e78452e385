/**
 * Key authentication (docs/contract.md#request-path step 1): key from the API's auth header, raw or "Bearer <key>",
 * looked up by SHA-256 hash; inactive, expired, or not authorised for this API / path / method → 403.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { sha256hex } from '../../lib/hash.js';
import type { StoredSession } from '../../contract/sessions.js';
import type { AccessDefinitionT } from '../../crds/schemas/access-definition.js';
import type { CompiledApi } from '../../contract/config.js';
import { endpointPattern, pathMatcher, type LinearMatcher } from '../../lib/path-pattern.js';
import { connectionOf } from '../../lib/http/connection.js';

export function extractKey(headers: IncomingHttpHeaders, headerName: string): string | undefined {
  const raw = headers[headerName];
  const v = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  if (!v) return undefined;
  // "Bearer <key>" (any case); checked without a regex on the hot path
  if (v.length > 7 && (v.charCodeAt(6) === 32 || v.charCodeAt(6) === 9) && v.slice(0, 6).toLowerCase() === 'bearer') {
    const k = v.slice(7).trim();
    return k || undefined;
  }
  if (v.length === 6 && v.toLowerCase() === 'bearer') return undefined; // "Bearer " with no key: missing
  return v;
}

/**
 * SHA-256 of recently seen keys, so a busy key is hashed once rather than on every request. Bounded:
 * cleared when it reaches HASH_CACHE_MAX entries. Holds raw keys in process memory only (never logged,
 * never stored), like the request that carried them.
 */
const HASH_CACHE_MAX = 10_000;
const hashCache = new Map<string, string>();
/**
 * `key` as node:http gives a header value: one character per byte (latin1). Hashing those bytes hashes
 * what the client sent, so a key with non-ASCII characters sent as UTF-8 matches the SHA-256 of the
 * same key written in a manifest or a facade path (UTF-8). For ASCII keys both are the same.
 */
export function keyHashOf(key: string): string {
  let h = hashCache.get(key);
  if (h === undefined) {
    h = sha256hex(key, 'latin1');
    if (hashCache.size >= HASH_CACHE_MAX) hashCache.clear();
    hashCache.set(key, h);
  }
  return h;
}

const NEVER: LinearMatcher = { test: () => false };
const patternCache = new Map<string, LinearMatcher>();
function urlMatches(url: string, path: string): boolean {
  let m = patternCache.get(url);
  if (!m) {
    try {
      m = pathMatcher(endpointPattern(url));
    } catch {
      m = NEVER; // an invalid pattern matches nothing
    }
    if (patternCache.size >= 10_000) patternCache.clear();
    patternCache.set(url, m);
  }
  return m.test(path);
}

function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}

/** Access rights check on the effective (policy-merged) access rights. */
export function accessAllowed(
  rights: Record<string, AccessDefinitionT> | null | undefined,
  api: CompiledApi,
  method: string,
  relPath: string,
): boolean {
  if (!rights || isEmpty(rights)) return true;
  const def = rights[api.api_id];
  if (!def) return false;
  const urls = def.allowed_urls ?? [];
  if (urls.length === 0) return true;
  return urls.some(
    (u) =>
      urlMatches(u.url, relPath) &&
      (u.methods.length === 0 || u.methods.some((m) => m.toUpperCase() === method || m === '*')),
  );
}

/** A fingerprint as compared: hex digits only, lower case (`AB:CD…` and `abcd…` are one). */
export function normalFingerprint(fp: string): string {
  return fp.replace(/[^0-9a-fA-F]/g, '').toLowerCase();
}

/**
 * A certificate-bound key (its `certificate`, docs/proxy.md "Certificate-bound keys"): the request came
 * over TLS with a client certificate that verified against client_ca_file (`authorized`) and whose SHA-256
 * fingerprint (of its DER) is that one.
 */
export function certificateMatches(req: IncomingMessage, certificate: string): boolean {
  const socket = connectionOf(req) as Partial<TLSSocket> | null;
  if (socket === null || socket.encrypted !== true || typeof socket.getPeerCertificate !== 'function') return false;
  // verified against client_ca_file (no CA bundle: no certificate is asked for, every bound key refused)
  if (socket.authorized !== true) return false;
  const peer = socket.getPeerCertificate();
  const fp = peer?.fingerprint256;
  return typeof fp === 'string' && fp !== '' && normalFingerprint(fp) === normalFingerprint(certificate);
}

/**
 * Authentication after the lookup: a session found, of the API's namespace, active and not expired. The
 * gateway runs the steps inline (extractKey → keyHashOf → session lookup → this), so no async frame,
 * promise or result object is allocated per request for them.
 *
 * The namespace: sessions live in one store by key hash, shared by every namespace whose sidecars use
 * that Redis; a key reaches only the APIs of its own namespace (docs/contract.md#resources: references resolve within
 * one namespace), so empty access_rights mean every API of that namespace, not of the cluster.
 */
export function sessionUsable(
  session: StoredSession | undefined,
  api: CompiledApi,
  nowSeconds: number,
): session is StoredSession {
  if (!session || session.namespace !== api.namespace) return false;
  const s = session.session;
  if (s.is_inactive) return false;
  if (s.expires && s.expires > 0 && s.expires < nowSeconds) return false;
  return true;
}
