/**
 * Live quota values for GET /gw/keys/{keyID}: the session the gateway uses (by key hash) read through the
 * gateway's own engine, so policies, custom rate-limit keys and the quota store are interpreted exactly as
 * the gateway does. `gw standalone` uses its in-process engine; `gw facade --redis` builds a read-only
 * engine over the shared store and the compiled config of its namespace.
 */
import type { SessionStore } from '../contract/sessions.js';
import type { StoredSession } from '../contract/sessions.js';
import type { QuotaState } from './backend.js';

/** What reads a live quota as the gateway applies it (the gateway's engine, wired by the CLI). */
export interface QuotaReader {
  readQuota(
    keyHash: string,
    stored: StoredSession,
    apiId?: string,
  ): Promise<{ remaining: number; renews: number } | undefined>;
}

export function liveQuota(
  sessions: SessionStore,
  engine: QuotaReader,
): (keyHash: string) => Promise<QuotaState | undefined> {
  return async (keyHash) => {
    const s = await sessions.get(keyHash);
    if (!s) return undefined;
    const out: QuotaState = {};
    const q = await engine.readQuota(keyHash, s);
    if (q) {
      out.remaining = q.remaining;
      out.renews = q.renews;
    }
    for (const [apiId, def] of Object.entries(s.session.access_rights ?? {})) {
      const max = def.limit?.quota_max;
      if (max === undefined || max <= 0) continue;
      const a = await engine.readQuota(keyHash, s, apiId);
      if (a) (out.apis ??= {})[apiId] = { remaining: a.remaining, renews: a.renews };
    }
    return out.remaining === undefined && !out.apis ? undefined : out;
  };
}
