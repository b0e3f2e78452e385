/** Sessions in memory (standalone, tests), behind the contract's SessionStore (contract/sessions.ts). */
import type { SessionStore, StoredSession } from '../contract/sessions.js';

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
