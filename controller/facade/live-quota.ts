/**
 * Live quota values for GET /gw/keys/{keyID}: the session the gateway uses (by key hash) read through the
 * gateway's own engine, so policies, custom rate-limit keys and the quota store are interpreted exactly as
 * the gateway does. `gw standalone` uses its in-process engine; `gw facade --redis` builds a read-only
 * engine over the shared store and the compiled config of its namespace.
 */
import type { SessionStore } from '../../lib/sessions.js';
import type { GatewayEngine } from '../../sidecar/engine/engine.js';
import type { QuotaState } from './backend.js';

export function liveQuota(sessions: SessionStore, engine: Pick<GatewayEngine, 'readQuota'>): (keyHash: string) => Promise<QuotaState | undefined> {
  return async (keyHash) => {
    const s = await sessions.get(keyHash);
    if (!s) return undefined;
    const q = await engine.readQuota(keyHash, s);
    return q && { remaining: q.remaining, renews: q.renews };
  };
}
