/**
 * Sessions: the key records the gateway authenticates against, stored by SHA-256 hash of the raw key.
 * Implementations: memory (standalone) and Redis (cluster). The raw key is never stored.
 */
import type { KeySessionT } from '../crds/schemas/access-key.js';

export interface StoredSession {
  /** Namespace of the AccessKey: apply_policies resolve within it. */
  namespace: string;
  /** metadata.name of the AccessKey resource, when known. */
  name?: string;
  session: KeySessionT;
}

export interface SessionStore {
  get(keyHash: string): Promise<StoredSession | undefined>;
  /**
   * The answer `get` would give when the store has it without I/O (memory, a fresh cache entry): the
   * session, or null for none. undefined: only `get` can tell. Lets the request path stay synchronous.
   */
  peek(keyHash: string): StoredSession | null | undefined;
  put(keyHash: string, value: StoredSession): Promise<void>;
  delete(keyHash: string): Promise<boolean>;
  list(): Promise<string[]>;
  /** Called with the hash of a session that changed or was deleted (cache invalidation). */
  onChange(listener: (keyHash: string) => void): void;
  close(): Promise<void>;
}

export class MemorySessionStore implements SessionStore {
  private readonly map = new Map<string, StoredSession>();
  private readonly listeners: ((keyHash: string) => void)[] = [];

  async get(keyHash: string): Promise<StoredSession | undefined> {
    return this.map.get(keyHash);
  }
  peek(keyHash: string): StoredSession | null {
    return this.map.get(keyHash) ?? null;
  }
  async put(keyHash: string, value: StoredSession): Promise<void> {
    this.map.set(keyHash, value);
    this.emit(keyHash);
  }
  async delete(keyHash: string): Promise<boolean> {
    const had = this.map.delete(keyHash);
    if (had) this.emit(keyHash);
    return had;
  }
  async list(): Promise<string[]> {
    return [...this.map.keys()];
  }
  onChange(listener: (keyHash: string) => void): void {
    this.listeners.push(listener);
  }
  async close(): Promise<void> {}
  private emit(keyHash: string): void {
    for (const l of this.listeners) l(keyHash);
  }
}

/** A store's session of a key hash, synchronously when `peek` knows it. */
export function lookupSession(
  store: SessionStore,
  keyHash: string,
): StoredSession | undefined | Promise<StoredSession | undefined> {
  const known = store.peek(keyHash);
  return known === undefined ? store.get(keyHash) : (known ?? undefined);
}
