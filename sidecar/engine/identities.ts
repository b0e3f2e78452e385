/**
 * A key's effective session (its policies applied, contract/limits/effective-session.ts) and the identity
 * its limits and quotas count against (its custom rate-limit key, else its hash). The identity is a
 * function of the key hash and the (cached, never mutated) effective session: kept with the latter, so the
 * identity string is not built on every request.
 */
import type { CompiledConfig } from '../../contract/config.js';
import type { StoredSession } from '../../contract/sessions.js';
import { effectiveSession, type EffectiveSession } from '../../contract/limits/effective-session.js';
import { limiterIdentity } from '../../contract/limits/rate-limit-key.js';

/** A key's effective session and the identity its limits count against. */
export interface Who {
  eff: EffectiveSession;
  identity: string;
}

export class Identities {
  private readonly cache = new WeakMap<EffectiveSession, Who & { keyHash: string }>();

  constructor(private readonly config: () => CompiledConfig) {}

  who(keyHash: string, stored: StoredSession): Who | Error {
    const eff = effectiveSession(stored, this.config());
    if (eff instanceof Error) return eff;
    const hit = this.cache.get(eff);
    if (hit !== undefined && hit.keyHash === keyHash) return hit;
    const w = { keyHash, eff, identity: limiterIdentity(keyHash, eff.rate_limit_pattern, eff.meta_data) };
    this.cache.set(eff, w);
    return w;
  }
}
