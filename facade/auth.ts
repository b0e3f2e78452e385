/** Credentials of the management endpoints, compared in constant time (docs/contract.md#management-endpoints). */
import type { IncomingMessage } from 'node:http';
import { safeEqual } from '../lib/hash.js';
import { HttpError } from '../lib/http/http-util.js';

/** A credential that was given and is wrong: a guess, counted by the facade's guess limit (rate-limit.ts). */
export class CredentialRefused extends HttpError {}

/** Compares against every candidate without stopping early, so timing reveals neither which nor how many. */
function matchesAny(given: string, candidates: readonly string[]): boolean {
  let ok = false;
  for (const c of candidates) ok = safeEqual(given, c) || ok;
  return ok;
}

/** `Authorization: Bearer <token>` with token in access_tokens: 401 when missing, 403 when wrong. */
export function requireBearer(req: IncomingMessage, accessTokens: readonly string[]): void {
  const h = req.headers.authorization;
  if (!h || !h.trim())
    throw new HttpError(401, 'Authorization header missing: expected "Bearer <access token>"', {
      'www-authenticate': 'Bearer',
    });
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h.trim());
  if (!m)
    throw new HttpError(401, 'Authorization header must be "Bearer <access token>"', { 'www-authenticate': 'Bearer' });
  if (!matchesAny(m[1]!, accessTokens)) throw new CredentialRefused(403, 'access token not accepted');
}

/** `X-Gw-Authorization: <secret>`: 401 when missing, 403 when wrong (or no secret configured). */
export function requireGwSecret(req: IncomingMessage, secret: string | undefined): void {
  const raw = req.headers['x-gw-authorization'];
  const h = Array.isArray(raw) ? raw[0] : raw;
  if (!h) throw new HttpError(401, 'X-Gw-Authorization header missing');
  if (!matchesAny(h, secret ? [secret] : [])) throw new CredentialRefused(403, 'X-Gw-Authorization not accepted');
}
