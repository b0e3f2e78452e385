/**
 * The store marker (contract/store-keys.ts): a key in Redis per controller scope, written by the leader.
 * Gone → the store lost its data (FLUSHALL, an empty restart or replica): every session is restored in one
 * pipelined bulk write (restore.ts) under the marker `restoring:`, then the marker says `ready:` and a full
 * resync follows. A marker left at `restoring:` (a leader that died mid-restore, a store lost again) is
 * restored again. Gateways hold on to the sessions they have seen until it says `ready:`. Checked every
 * second and on each reconnect, by the leader only, one check at a time.
 */
import type { Logger } from '../lib/logger.js';
import type { StoreClient } from '../lib/store/redis.js';
import type { Informer } from '../lib/kube/informer.js';
import { markerComplete, markerReady, markerRestoring, storeMarkerKey } from '../contract/store-keys.js';
import type { OperatorMetrics } from './metrics.js';
import { restoreSessions } from './restore.js';

const { randomBytes } = process.getBuiltinModule('node:crypto');

export interface StoreMarkerOptions {
  redis: StoreClient;
  /** The controller's `--namespace` (undefined: all; one marker per scope). */
  scope?: string;
  identity: string;
  logger: Logger;
  metrics: OperatorMetrics;
  keys: Informer;
  leading: () => boolean;
  synced: () => boolean;
  /** A full resync, after a restore. */
  resync: (cause: string) => void;
}

export class StoreMarker {
  private restoring = false;

  constructor(private readonly o: StoreMarkerOptions) {}

  async check(): Promise<void> {
    const { redis, identity, logger, metrics } = this.o;
    if (!this.o.leading() || !this.o.synced() || redis.status !== 'ready' || this.restoring) return;
    const key = storeMarkerKey(this.o.scope);
    this.restoring = true;
    try {
      let current = await redis.get(key);
      if (markerComplete(current)) return;
      if (current === null && (await redis.set(key, markerRestoring(identity), 'NX')) !== 'OK') {
        current = await redis.get(key); // written meanwhile (another controller of this scope)
        if (markerComplete(current)) return;
      }
      if (current === null) logger.info('store marker missing (new or emptied store): restoring sessions');
      else await redis.set(key, markerRestoring(identity));
      const t0 = performance.now();
      const n = await restoreSessions(redis, this.o.keys.list());
      await redis.set(key, markerReady(identity, randomBytes(6).toString('base64url')));
      const seconds = (performance.now() - t0) / 1000;
      metrics.restoreSeconds.set(seconds);
      metrics.restores.inc();
      logger.info({ sessions: n, ms: Math.round(seconds * 1000) }, 'store restored: full resync');
      this.o.resync('redis');
    } catch (e) {
      logger.warn({ err: (e as Error).message }, 'store restore interrupted; retried within a second');
    } finally {
      this.restoring = false;
    }
  }
}
