/**
 * Per-client API buckets (docs/contract.md#limit-by, `limit_by`): the bucket of a request's client, and the
 * bound on the in-process state of those buckets. The set holds their names only (the limiters hold the
 * state); a name evicted to make room (the one least recently used, to the CLOCK approximation of
 * lib/recent-set.ts) is forgotten by the limiters that may hold it in process. Made on first use.
 */
import type { ClientKey, CompiledApi } from '../../contract/config.js';
import { clientBucket } from '../../contract/limits/client-bucket.js';
import { RecentSet } from '../../lib/recent-set.js';
import type { Limiters } from '../../limiters/select.js';
import type { CheckRequest } from './types.js';

export class ClientBuckets {
  private set: RecentSet | undefined;

  constructor(
    private readonly max: number,
    private readonly limiters: Limiters,
    private readonly onEvicted: (() => void) | undefined,
  ) {}

  /** The bucket of this request's client of a per-client API limit, marked as used. */
  bucket(req: CheckRequest, api: CompiledApi, by: ClientKey, ruleId?: string): string {
    const bucket = clientBucket(`a:${api.namespace}/${api.api_id}`, by, req.client?.(by) ?? '', ruleId);
    this.names().touch(bucket);
    return bucket;
  }

  /** Per-client buckets whose in-process state is kept (≤ max_client_buckets). */
  get size(): number {
    return this.set?.size ?? 0;
  }

  private names(): RecentSet {
    return (this.set ??= new RecentSet(this.max, (bucket) => {
      this.limiters.drl.forget(bucket);
      this.limiters.store.forget(bucket);
      this.onEvicted?.();
    }));
  }
}
