/**
 * Bulk restore of the sessions into a store that lost its data (FLUSHALL, a restart or failover to an
 * empty server): every AccessKey whose status records the session it owns (`status.keyHash`, for the
 * spec of its current generation) is written again from the informer cache, without the Secret or any
 * API call, as one MSET per 1,000 sessions on a single server, and on a cluster as concurrent SETs that
 * ioredis pipelines to each slot's master (a multi-key MSET across hash slots fails with CROSSSLOT). The full resync that follows reconciles everything else (statuses, clients, keys
 * whose status lags their spec). Sessions the controller withdrew (an invalid spec, a missing Secret
 * key, a duplicate) are not restored.
 */
import { AccessKeyResource } from '../crds/kinds.js';
import { sessionOf } from '../compiler/key-sessions.js';
import { SESSION_PREFIX } from '../contract/sessions.js';
import type { KubeObject } from '../lib/kube/informer.js';
import type { StoreClient } from '../lib/store/redis.js';
import { readyCondition } from './status.js';

/** Ready reasons of a key whose session is not in the store (withdrawn or never written). */
const WITHOUT_SESSION = new Set(['InvalidSpec', 'SecretNotFound']);
const BATCH = 1000;

/** The session a key owns, as it should be in the store, or undefined when it should not be there. */
export function restorable(raw: KubeObject): [key: string, value: string] | undefined {
  if (raw.metadata.deletionTimestamp) return undefined;
  const status = (raw as { status?: { keyHash?: unknown; observedGeneration?: unknown } }).status;
  const hash = status?.keyHash;
  if (typeof hash !== 'string' || !/^[0-9a-f]{64}$/.test(hash)) return undefined;
  if (status?.observedGeneration !== raw.metadata.generation) return undefined;
  const ready = readyCondition(raw);
  if (!ready || (ready.status !== 'True' && WITHOUT_SESSION.has(ready.reason ?? ''))) return undefined;
  const parsed = AccessKeyResource.safeParse(raw);
  if (!parsed.success) return undefined;
  // a key_hash in the spec names the session itself: a status that disagrees is stale
  if (parsed.data.spec.key_hash && parsed.data.spec.key_hash !== hash) return undefined;
  return [SESSION_PREFIX + hash, JSON.stringify(sessionOf(parsed.data))];
}

/** Writes the sessions of `keys`; returns how many were written. */
export async function restoreSessions(redis: StoreClient, keys: KubeObject[]): Promise<number> {
  const writes: [string, string][] = [];
  for (const k of keys) {
    const w = restorable(k);
    if (w) writes.push(w);
  }
  const cluster = 'nodes' in redis;
  for (let i = 0; i < writes.length; i += BATCH) {
    const batch = writes.slice(i, i + BATCH);
    // one MSET per batch on a single server; on a cluster the keys' slots differ (CROSSSLOT): one SET each
    if (!cluster) await redis.mset(...batch.flat());
    else await Promise.all(batch.map(([k, v]) => redis.set(k, v)));
  }
  return writes.length;
}
