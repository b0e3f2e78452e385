/**
 * /gw/keys: create or import keys (X-Gw-Authorization). Keys are stored by SHA-256 hash only; the raw
 * keyID is answered back once (docs/contract.md#management-endpoints) and never stored or logged.
 */
import { KeySession, type KeySessionT } from '../crds/schemas/access-key.js';
import { sha256hex } from '../lib/hash.js';
import { keyResourceName, type KeyRecord } from './backend.js';
import { requireGwSecret } from './auth.js';
import type { FacadeContext, Route, RouteArgs } from './context.js';
import { hasControlChar, HttpError, invisibleCharIn, readJson, sendJson, validate } from '../lib/http/http-util.js';

const MAX_KEY_ID = 1024;

function hashedParam(query: URLSearchParams): boolean {
  const v = query.get('hashed');
  if (v === null || v === 'false') return false;
  if (v === 'true') return true;
  throw new HttpError(400, 'hashed: must be true or false');
}

function suppressResetParam(query: URLSearchParams): boolean {
  const v = query.get('suppress_reset');
  if (v === null) return false;
  if (v === '1') return true;
  throw new HttpError(400, 'suppress_reset: the only allowed value is 1');
}

/** keyID → { hash, echo }: the hash is sha256hex(keyID), or keyID itself when hashed=true. */
function keyHashOf(keyID: string, hashed: boolean, creating: boolean): string {
  if (keyID.length > MAX_KEY_ID) throw new HttpError(400, `keyID: longer than ${MAX_KEY_ID} characters`);
  // Never a file name (keys are stored by hash), but a key that looks like a path is refused outright:
  // dot segments (path traversal), control characters (header/log injection) and bidi or other format
  // characters (which make a log line or listing show another id than the one stored) are no key material.
  if (hasControlChar(keyID)) throw new HttpError(400, 'keyID: must not contain control characters');
  const invisible = invisibleCharIn(keyID);
  if (invisible !== undefined)
    throw new HttpError(400, `keyID: must not contain control, bidi or other format characters (found ${invisible})`);
  // a header value cannot carry them (the gateway trims what it reads): such a key could never be sent.
  // Refused where a key is written; one already stored (written by hand) can still be read and deleted by name.
  if (creating && keyID.trim() !== keyID)
    throw new HttpError(400, 'keyID: must not begin or end with whitespace (an HTTP header cannot carry it)');
  if (/(^|[/\\])\.\.?($|[/\\])/.test(keyID))
    throw new HttpError(400, 'keyID: must not contain "." or ".." path segments');
  if (!hashed) return sha256hex(keyID);
  if (!/^[0-9a-fA-F]{64}$/.test(keyID))
    throw new HttpError(400, 'keyID: with hashed=true it must be a SHA-256 hex digest (64 hex digits)');
  return keyID.toLowerCase();
}

/** Deprecated fields mapped onto their replacements (the replacement wins when both are given), then dropped. */
export function normalizeSession(s: KeySessionT): KeySessionT {
  const out: KeySessionT = { ...s };
  if (out.apply_policy_id !== undefined) {
    if (!out.apply_policies?.length && out.apply_policy_id) out.apply_policies = [out.apply_policy_id];
    delete out.apply_policy_id;
  }
  if (out.enable_detail_recording !== undefined) {
    if (out.enable_detailed_recording === undefined) out.enable_detailed_recording = out.enable_detail_recording;
    delete out.enable_detail_recording;
  }
  return out;
}

/**
 * The policies and APIs a key body names must exist in the key's namespace: 400 naming the field at once,
 * rather than a key the controller reports as not Ready (and the facade waiting for it until its timeout).
 */
async function checkReferences(
  ctx: FacadeContext,
  session: KeySessionT,
  namespace: string,
  body: KeySessionT,
): Promise<void> {
  // the field the client sent: the deprecated apply_policy_id when it was the one that set the policy
  const fromDeprecated = !body.apply_policies?.length && !!body.apply_policy_id;
  for (const [i, p] of (session.apply_policies ?? []).entries()) {
    const field = fromDeprecated ? 'apply_policy_id' : `apply_policies.${i}`;
    const policy = await ctx.backend.getPolicy(namespace, p);
    if (!policy) throw new HttpError(400, `${field}: policy ${JSON.stringify(p)} not found in namespace ${namespace}`);
    // the gateway refuses a key applying an inactive policy (and the controller reports it not Ready)
    if (!policy.active)
      throw new HttpError(
        400,
        `${field}: policy ${JSON.stringify(p)} is inactive (active: false) in namespace ${namespace}`,
      );
  }
  const [missing] = await ctx.backend.missingApis(namespace, Object.keys(session.access_rights ?? {}));
  if (missing !== undefined)
    throw new HttpError(
      400,
      `access_rights.${missing}: API ${JSON.stringify(missing)} not found in namespace ${namespace}`,
    );
}

/** `creating`: the request writes the key (POST, PUT). */
function keyParams(args: RouteArgs, creating = false): { keyID: string; keyHash: string } {
  requireGwSecret(args.req, args.ctx.options.secret);
  const keyID = args.params.keyID!;
  return { keyID, keyHash: keyHashOf(keyID, hashedParam(args.query), creating) };
}

async function addKey(args: RouteArgs): Promise<void> {
  const { ctx, res, query } = args;
  const { keyID, keyHash } = keyParams(args, true);
  const suppressReset = suppressResetParam(query);
  const body = validate(KeySession, await readJson(args.req));
  const spec = normalizeSession(body);
  const action = await ctx.locks.run(`key:${keyHash}`, async () => {
    const existing = await ctx.backend.getKey(keyHash);
    const namespace = existing?.namespace ?? ctx.keyNamespace;
    await checkReferences(ctx, spec, namespace, body);
    const record: KeyRecord = { namespace, name: existing?.name ?? keyResourceName(keyHash), spec, suppressReset };
    await ctx.backend.putKey(keyHash, record);
    return existing ? 'modified' : 'added';
  });
  ctx.logger.info({ keyHash, action, suppressReset }, 'key saved');
  sendJson(res, 200, { key: keyID, key_hash: keyHash, action, status: 'ok' });
}

async function replaceKey(args: RouteArgs): Promise<void> {
  const { ctx, res, query } = args;
  const { keyID, keyHash } = keyParams(args, true);
  const suppressReset = suppressResetParam(query);
  const body = validate(KeySession, await readJson(args.req));
  const spec = normalizeSession(body);
  await ctx.locks.run(`key:${keyHash}`, async () => {
    const existing = await ctx.backend.getKey(keyHash);
    if (!existing) throw new HttpError(404, 'key not found');
    await checkReferences(ctx, spec, existing.namespace, body);
    await ctx.backend.putKey(keyHash, { namespace: existing.namespace, name: existing.name, spec, suppressReset });
  });
  ctx.logger.info({ keyHash, action: 'modified', suppressReset }, 'key saved');
  sendJson(res, 200, { key: keyID, key_hash: keyHash, action: 'modified', status: 'ok' });
}

async function getKey(args: RouteArgs): Promise<void> {
  const { ctx, res } = args;
  const { keyHash } = keyParams(args);
  const existing = await ctx.backend.getKey(keyHash);
  if (!existing) throw new HttpError(404, 'key not found');
  // the live values need the store; without it the stored session is still the answer (not a 500)
  const live = await ctx.backend.quota(keyHash).catch((e: unknown) => {
    ctx.logger.warn({ keyHash, err: (e as Error).message }, 'live quota values unavailable; answering the stored ones');
    return undefined;
  });
  const body: KeySessionT = { ...existing.spec };
  if (live?.remaining !== undefined) {
    body.quota_remaining = live.remaining;
    body.quota_renews = live.renews;
  }
  if (live?.apis && body.access_rights) {
    const rights = { ...body.access_rights };
    for (const [apiId, q] of Object.entries(live.apis)) {
      const def = rights[apiId];
      if (def?.limit) rights[apiId] = { ...def, limit: { ...def.limit, quota_remaining: q.remaining } };
    }
    body.access_rights = rights;
  }
  sendJson(res, 200, body);
}

async function deleteKey(args: RouteArgs): Promise<void> {
  const { ctx, res } = args;
  const { keyID, keyHash } = keyParams(args);
  const deleted = await ctx.locks.run(`key:${keyHash}`, () => ctx.backend.deleteKey(keyHash));
  if (!deleted) throw new HttpError(404, 'key not found');
  ctx.logger.info({ keyHash, action: 'deleted' }, 'key deleted');
  sendJson(res, 200, { key: keyID, key_hash: keyHash, action: 'deleted', status: 'ok' });
}

async function listKeys(args: RouteArgs): Promise<void> {
  requireGwSecret(args.req, args.ctx.options.secret);
  sendJson(args.res, 200, { keys: await args.ctx.backend.listKeys() });
}

export const keyRoutes: Route[] = [
  { template: '/gw/keys', methods: { GET: listKeys } },
  { template: '/gw/keys/{keyID}', methods: { POST: addKey, PUT: replaceKey, GET: getKey, DELETE: deleteKey } },
];
