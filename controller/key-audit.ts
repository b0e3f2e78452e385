/**
 * The key audit of a full resync: every AccessKey against its memo (key-memo.ts) and the store, one MGET per
 * AUDIT_BATCH keys whose memo holds (on a cluster, the GETs of a batch pipelined per master); a key is
 * queued (bulk) when its session differs or it has no memo. A store error queues the batch. One audit at a
 * time; a resync asked for meanwhile runs another once this one ends. An audit stops when leadership goes.
 */
import type { StoreClient } from '../lib/store/redis.js';
import { SESSION_PREFIX } from '../contract/sessions.js';
import type { OperatorContext } from './context.js';
import type { WorkQueue } from './work-queue.js';
import { keyItem, type ItemOf, type WorkItem } from './work-items.js';

/** AccessKeys whose sessions one store read of a resync compares. */
const AUDIT_BATCH = 500;

/** The values of `keys`: one MGET on a single server; on a cluster, GETs (the keys' slots differ). */
async function readSessions(redis: StoreClient, keys: string[]): Promise<(string | null)[]> {
  if ('nodes' in redis) return Promise.all(keys.map((k) => redis.get(k)));
  return redis.mget(...keys);
}

export interface KeyAuditOptions {
  ctx: OperatorContext;
  queue: WorkQueue<WorkItem>;
  leading: () => boolean;
}

export class KeyAudit {
  private auditing = false;
  /** A resync asked for another audit while this one ran. */
  private again = false;

  constructor(private readonly o: KeyAuditOptions) {}

  async run(): Promise<void> {
    if (this.auditing) {
      this.again = true;
      return;
    }
    this.auditing = true;
    try {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && this.o.leading());
    } finally {
      this.auditing = false;
    }
  }

  private async pass(): Promise<void> {
    const { ctx, queue } = this.o;
    const keys = ctx.informers.keys.list();
    for (let i = 0; i < keys.length && this.o.leading(); i += AUDIT_BATCH) {
      const checks: { item: ItemOf<'AccessKey'>; hash: string; json: string }[] = [];
      for (const raw of keys.slice(i, i + AUDIT_BATCH)) {
        const item = keyItem(raw.metadata.namespace ?? 'default', raw.metadata.name);
        const memo = ctx.redis ? ctx.keyMemos.current(ctx, raw) : undefined;
        if (memo) checks.push({ item, hash: memo.hash, json: memo.json });
        else queue.add(item, 'bulk');
      }
      if (!checks.length) continue;
      let stored: (string | null)[] | undefined;
      try {
        stored = await readSessions(
          ctx.redis!,
          checks.map((c) => SESSION_PREFIX + c.hash),
        );
      } catch {
        stored = undefined; // the reconciles report the store's state
      }
      checks.forEach((c, j) => {
        if (stored?.[j] === c.json) return void ctx.metrics.unchanged.inc({ kind: 'AccessKey' });
        ctx.keyMemos.forget(c.item.namespace, c.item.name);
        queue.add(c.item, 'bulk');
      });
    }
  }
}
