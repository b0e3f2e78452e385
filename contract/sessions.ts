/**
 * Sessions: the key records the gateway authenticates against, stored by SHA-256 hash of the raw key.
 * Implementations (stores/): memory (standalone) and Redis (cluster). The raw key is never stored.
 * In Redis a session is `gw:session:<hash>` (JSON `{namespace, name, session}`); every change is published
 * on `gw:sessions` (one hash, or several space-separated).
 */
import type { KeySessionT } from '../crds/schemas/access-key.js';

export const SESSION_PREFIX = 'gw:session:';
export const SESSION_CHANNEL = 'gw:sessions';

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

/** A store's session of a key hash, synchronously when `peek` knows it. */
export function lookupSession(
  store: SessionStore,
  keyHash: string,
): StoredSession | undefined | Promise<StoredSession | undefined> {
  const known = store.peek(keyHash);
  return known === undefined ? store.get(keyHash) : (known ?? undefined);
}
