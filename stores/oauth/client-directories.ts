/**
 * Where a gateway finds OAuth client records (the contract's ClientDirectory, contract/oauth/clients.ts): in
 * memory from standalone's directory, or from the records the controller writes to Redis.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../../lib/logger.js';
import { DEFAULT_STORE_DEADLINE_MS } from '../../lib/store/store-calls.js';
import { CachedLookup } from '../../lib/store/cached-lookup.js';
import {
  CLIENT_CHANNEL,
  clientRecordKey,
  parseClientRecord,
  type ClientDirectory,
  type ClientRecord,
} from '../../contract/oauth/clients.js';

/** Standalone: the clients of the directory, replaced as a whole on every apply. */
export class MemoryClientDirectory implements ClientDirectory {
  private clients = new Map<string, ClientRecord>();

  replace(records: ClientRecord[]): void {
    this.clients = new Map(records.map((r) => [clientRecordKey(r.namespace, r.api_id, r.client_id), r]));
  }
  all(): IterableIterator<ClientRecord> {
    return this.clients.values();
  }
  peek(ns: string, apiId: string, clientId: string): ClientRecord | null {
    return this.clients.get(clientRecordKey(ns, apiId, clientId)) ?? null;
  }
  async get(ns: string, apiId: string, clientId: string): Promise<ClientRecord | undefined> {
    return this.clients.get(clientRecordKey(ns, apiId, clientId));
  }
}

/**
 * Cluster: client records read from Redis, kept `cacheMs` (1 s) in process, dropped at once when the
 * controller publishes a change: a deleted client's tokens stop working within a second on every gateway.
 * A store that cannot answer: the last record seen is used (a client is not refused for the store's fault).
 */
export class RedisClientDirectory implements ClientDirectory {
  private readonly lookups: CachedLookup<ClientRecord>;

  constructor(
    private readonly redis: Redis | Cluster,
    logger: Logger,
    cacheMs = 1000,
    deadlineMs = DEFAULT_STORE_DEADLINE_MS,
  ) {
    this.lookups = new CachedLookup(redis, logger, {
      channel: CLIENT_CHANNEL,
      what: 'OAuth client',
      cacheMs,
      deadlineMs,
    });
  }

  subscribe(): Promise<void> {
    return this.lookups.subscribe();
  }

  peek(ns: string, apiId: string, clientId: string): ClientRecord | null | undefined {
    return this.lookups.peek(clientRecordKey(ns, apiId, clientId));
  }

  async get(ns: string, apiId: string, clientId: string): Promise<ClientRecord | undefined> {
    const key = clientRecordKey(ns, apiId, clientId);
    return this.lookups.get(
      key,
      async () => parseClientRecord(await this.redis.get(key)),
      (last) => last?.value,
    );
  }

  close(): Promise<void> {
    return this.lookups.close();
  }
}
